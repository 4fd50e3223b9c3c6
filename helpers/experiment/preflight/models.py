"""The models a run loads, checked without loading them: a local folder holds a config, a hub id exists (metadata).

    found = find_model(P.model_id_or_path, "model_id_or_path", kind="tts")    # Found, or raises PreflightError
    found.parameters, found.download_bytes, found.config

Hub ids are asked about with one metadata call (`HfApi.model_info`) and the safetensors headers (a few kB each), so
the sizes the resource estimate needs come before any download of size. Offline (HF_HUB_OFFLINE=1), a hub id is
found in the local cache or refused.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from helpers.experiment.preflight.check import PreflightError
from helpers.experiment.preflight.hub import ask_hub

OTHER_WEIGHTS = (".bin", ".msgpack", ".h5", ".ot", ".onnx", ".onnx_data", ".pt", ".pth", ".ckpt", ".tflite", ".mlmodel")
KINDS = {"tts": "qwen3_tts", "asr": "whisper"}                  # kind -> the model_type its config.json must name


@dataclass
class Found:
    """A model folder or hub id as the check found it: config, parameter counts per tensor, bytes still to download."""

    name: str
    where: str                                  # "local folder", "hub", "hub (local cache, offline)"
    config: dict
    tensors: dict[str, int] = field(default_factory=dict)       # tensor name -> elements
    download_bytes: int = 0

    @property
    def parameters(self) -> int:
        return sum(self.tensors.values())

    def parameters_under(self, prefix: str) -> int:
        return sum(n for name, n in self.tensors.items() if name.startswith(prefix))


def is_local(name: str) -> bool:
    """Whether a model or dataset name means a folder (it exists, or looks like a path) rather than a hub id."""
    return Path(name).expanduser().exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1


def wanted(files: list[str]) -> list[str]:
    """The files a load downloads: all but other weight formats where safetensors are there."""
    if not any(f.endswith(".safetensors") for f in files):
        return files
    return [f for f in files if not f.endswith(OTHER_WEIGHTS)]


def header_tensors(read) -> dict[str, int]:
    """Tensor name -> elements from a safetensors header; `read(start, length)` gives the file's bytes."""
    size = struct.unpack("<Q", read(0, 8))[0]
    header = json.loads(read(8, size))
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            n = 1
            for d in info["shape"]:
                n *= d
            out[name] = n
    return out


def check_config(name: str, config: dict, kind: str, param: str) -> None:
    """The config is the kind of model the run needs (Qwen3-TTS 12 Hz; Whisper)."""
    if kind == "tts":
        from helpers.backends.qwen3.backend import TOKENIZER_12HZ
        if config.get("model_type") != KINDS[kind] or config.get("tokenizer_type") != TOKENIZER_12HZ:
            raise PreflightError(f"{param}={name!r}: config.json has model_type={config.get('model_type')!r}, "
                                 f"tokenizer_type={config.get('tokenizer_type')!r}; a 12 Hz Qwen3-TTS checkpoint has "
                                 f"qwen3_tts, {TOKENIZER_12HZ} (e.g. Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice)")
    elif config.get("model_type") != KINDS[kind]:
        raise PreflightError(f"{param}={name!r}: config.json has model_type={config.get('model_type')!r}, expected "
                             f"{KINDS[kind]!r} (e.g. openai/whisper-large-v3-turbo)")


def needed_files(kind: str) -> tuple[str, ...]:
    """Files the run reads beside config.json: the speech tokenizer's config; Whisper's spelling map."""
    return ("speech_tokenizer/config.json",) if kind == "tts" else ("normalizer.json",)


def find_local(name: str, param: str, kind: str, where: str = "local folder") -> Found:
    """A local folder (or a cached hub snapshot): its config.json, the files the run reads, safetensors headers."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise PreflightError(f"{param}={name!r}: no such folder; give an existing checkpoint folder or a hub id "
                             "(owner/name)")
    missing = [f for f in ("config.json", *needed_files(kind)) if not (folder / f).is_file()]
    if missing:
        raise PreflightError(f"{param}={name!r}: the folder has no {', '.join(missing)}; give a folder saved with "
                             "save_pretrained (as the hub checkpoint is laid out) or a hub id")
    config = json.loads((folder / "config.json").read_text())
    check_config(name, config, kind, param)
    tensors = {}
    for file in sorted(folder.rglob("*.safetensors")):
        with open(file, "rb") as f:
            def read(start, length, f=f):
                f.seek(start)
                return f.read(length)
            prefix = "" if file.parent == folder else f"{file.parent.relative_to(folder)}/"
            tensors.update({prefix + k: v for k, v in header_tensors(read).items()})
    return Found(name, where, config, tensors)


def find_hub(name: str, param: str, kind: str) -> Found:
    """A hub id: one metadata call (files and sizes), its config.json and safetensors headers; nothing large."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.constants import HF_HUB_OFFLINE

    if HF_HUB_OFFLINE:
        cached = try_to_load_from_cache(name, "config.json")
        if not isinstance(cached, str):
            raise PreflightError(f"{param}={name!r}: HF_HUB_OFFLINE is set and the model is not in the local cache; "
                                 "unset HF_HUB_OFFLINE (to download it), or give a local folder")
        return find_local(str(Path(cached).parent), param, kind, "hub (local cache, offline)")
    info = ask_hub(lambda api: api.model_info(name, files_metadata=True), param, name)
    files = {s.rfilename: s.size or 0 for s in info.siblings}
    missing = [f for f in ("config.json", *needed_files(kind)) if f not in files]
    if missing:
        raise PreflightError(f"{param}={name!r}: the hub repository has no {', '.join(missing)}; not a checkpoint "
                             "this run can load")
    config = json.loads(Path(ask_hub(lambda api: hf_hub_download(name, "config.json"), param, name)).read_text())
    check_config(name, config, kind, param)
    tensors = {}
    for file in (f for f in files if f.endswith(".safetensors")):
        meta = ask_hub(lambda api: api.parse_safetensors_file_metadata(name, file), param, name)
        prefix = f"{os.path.dirname(file)}/" if "/" in file else ""
        tensors.update({prefix + k: t.parameter_count for k, t in meta.tensors.items()})
    to_get = sum(files[f] for f in wanted(list(files)) if not isinstance(try_to_load_from_cache(name, f), str))
    return Found(name, "hub", config, tensors, to_get)


def find_model(name: str, param: str, kind: str) -> Found:
    """A local folder or a hub id, checked (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: allowed {', '.join(KINDS)}")
    return find_local(name, param, kind) if is_local(name) else find_hub(name, param, kind)
