"""Disk and memory a run needs, estimated from its parameters and the models' sizes, against what this machine has.

    need = Needs.of(P, tts, asr)          # tts, asr: `models.Found`
    check_disk(P, need); check_memory(P, need)

Upper bounds, in plain arithmetic: every utterance is taken as max_utterance_seconds long (12.5 frames a second);
a frame's saved codes are 16 x 8 bytes; a teacher-forced frame adds the talker state g (H_talker values), and the
drafters' states h and r (15 x H_predictor values each) are saved where they fit in
`helpers.method.training.MATERIALISE_BYTES`, in the inner loop's dtype. Weights: parameters x the run's bytes per value
(Whisper: 2 on CUDA, 4 on a CPU), plus a copy of the code predictor and E0 where the inner loop has its own dtype.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from helpers.experiment.run.params import REPO_ROOT, RunParams
from helpers.experiment.preflight.check import PreflightError, Skipped, count, size
from helpers.experiment.preflight.models import Found

FRAMES_PER_SECOND = 12.5
CODE_BYTES = 16 * 8                                   # a frame's 16 codes, int64
BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
PREDICTOR = ("talker.code_predictor.", "talker.model.codec_embedding.")      # what an inner-loop copy holds


@dataclass
class Needs:
    """Bytes per purpose (name -> (bytes, how)), on disk and in memory."""

    disk: dict[str, tuple[int, str]] = field(default_factory=dict)
    memory: dict[str, tuple[int, str]] = field(default_factory=dict)
    downloads: int = 0

    @classmethod
    def of(cls, P: RunParams, tts: Found, asr: Found) -> "Needs":
        from helpers.method.training import MATERIALISE_BYTES

        need = cls(downloads=tts.download_bytes + asr.download_bytes)
        talker = tts.config["talker_config"]
        h_talker, h_pred = talker["hidden_size"], talker["code_predictor_config"]["hidden_size"]
        b, b_in = BYTES[P.dtype], BYTES[P.inner_dtype]
        utterances = {"train": P.train_samples, "validation": P.validation_samples,
                      "calibration": P.calibration_samples,
                      "evaluation": P.eval_samples_per_language * len(P.languages)}
        frames = {role: int(n * P.max_utterance_seconds * FRAMES_PER_SECOND) for role, n in utterances.items()}
        learn = frames["train"] + frames["validation"]
        need.disk["models"] = (need.downloads, f"{size(need.downloads)} of model files not yet in the hub cache")
        need.disk["codes"] = (sum(frames.values()) * CODE_BYTES,
                              f"{sum(frames.values())} frames x {CODE_BYTES} B of codes")
        need.disk["teacher forcing"] = (learn * h_talker * b_in, f"{learn} frames x g {h_talker} x {b_in} B")
        states = [frames[r] * 15 * h_pred * b_in for r in ("train", "validation")]
        saved = 2 * sum(s for s in states if s <= MATERIALISE_BYTES)         # h and r
        need.disk["drafter states"] = (saved, f"h and r, 15 x {h_pred} x {b_in} B a frame, where <= "
                                              f"{size(MATERIALISE_BYTES)}")
        synth = frames["evaluation"] * P.wer_seeds * 2
        need.disk["syntheses"] = (synth * CODE_BYTES, f"{synth} frames (AR and speculative x {P.wer_seeds} seeds) "
                                                      f"x {CODE_BYTES} B")
        asr_b = 2 if P.device == "cuda" else 4
        whisper = f" + Whisper's {count(asr.parameters)} x {asr_b} B" if asr.tensors else ""   # none: not counted
        need.memory["weights"] = (tts.parameters * b + asr.parameters * asr_b,
                                  f"{count(tts.parameters)} parameters x {b} B{whisper}")
        if P.inner_dtype != P.dtype:
            copy = sum(tts.parameters_under(p) for p in PREDICTOR)
            need.memory["inner loop copy"] = (copy * b_in, f"{count(copy)} parameters x {b_in} B")
        need.memory["teacher forcing"] = need.disk["teacher forcing"]
        need.memory["drafter states"] = (saved // 2, "h or r, one at a time")
        return need


def free_disk(path: Path) -> tuple[int, int]:
    """(free bytes, device id) of the filesystem a path is on (or would be: its nearest existing folder)."""
    path = Path(path).expanduser().resolve()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free, path.stat().st_dev


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes; None where there is none (not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_disk(P: RunParams, need: Needs) -> str:
    """Model downloads against the hub cache's filesystem and the run's files against its outputs' (summed where
    they are one filesystem)."""
    from huggingface_hub.constants import HF_HUB_CACHE

    run = sum(n for k, (n, _) in need.disk.items() if k != "models")
    out = Path(P.run_dir) if Path(P.run_dir).is_absolute() else REPO_ROOT / P.run_dir
    (hub_free, hub_dev), (run_free, run_dev) = free_disk(Path(HF_HUB_CACHE)), free_disk(out)
    parts = "; ".join(f"{k} {size(n)} ({how})" for k, (n, how) in need.disk.items())
    places = [(need.downloads + run, run_free, str(out))] if hub_dev == run_dev else \
        [(need.downloads, hub_free, HF_HUB_CACHE), (run, run_free, str(out))]
    short = [f"{where} needs {size(n)}, has {size(free)} free" for n, free, where in places if n > free]
    if short:
        raise PreflightError(f"{'; '.join(short)} [{parts}]: free space there, set HF_HOME (the hub cache) or "
                             "output_dir elsewhere, or use fewer utterances")
    return f"needs at most {size(need.downloads + run)}: {parts}; free: " + ", ".join(
        f"{size(free)} at {where}" for _, free, where in places)


def check_memory(P: RunParams, need: Needs) -> str:
    """The estimate against MemAvailable (a CPU run: everything; a CUDA run: the weights, as they load) and, on CUDA,
    against the GPU's free memory where one is visible."""
    import torch

    total = sum(n for n, _ in need.memory.values())
    parts = "; ".join(f"{k} {size(n)} ({how})" for k, (n, how) in need.memory.items())
    host_need = need.memory["weights"][0] if P.device == "cuda" else total
    host = available_memory()
    if host is None:
        raise Skipped(f"no /proc/meminfo here to read MemAvailable; the run needs about {size(total)} [{parts}]")
    if host_need > host:
        raise PreflightError(f"needs about {size(host_need)} of host memory, {size(host)} available [{parts}]: close "
                             "other processes, or use a machine with more memory (or fewer utterances)")
    line = f"needs about {size(total)} ({parts}); host: {size(host_need)} of {size(host)} available"
    if P.device == "cuda" and torch.cuda.is_available():
        free = torch.cuda.mem_get_info()[0]
        if total > free:
            raise PreflightError(f"needs about {size(total)} of GPU memory, {size(free)} free [{parts}]: free the GPU "
                                 "or use one with more memory")
        line += f"; GPU: {size(free)} free"
    return line
