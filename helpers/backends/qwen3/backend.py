"""The `qwen3` backend: the official Qwen3-TTS 12 Hz CustomVoice checkpoint, its speech tokenizer, the paper's
datasets and Whisper.

    backend = Qwen3Backend.load("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "cuda", "bfloat16", data=DataSpec(...))
    samples = backend.samples("calibration")     # text as generate_custom_voice tokenizes it, codes [T, 16]
    backend.synthesize(samples[0], decoder, seed=0)                # official generate, our inner loop
    backend.predictor                            # the inner loop: the code predictor, or a copy (inner_loop_dtype)
    backend.decode(codes)                        # codes [T, 16] -> float audio [n] at backend.sample_rate

Everything runs through `qwen_tts.Qwen3TTSModel` (`backend.tts`): its processor and chat format for the text,
its generation defaults (generation_config.json) with the run's top-k / top-p / temperature for the talker
and the code predictor alike, and `non_streaming_mode=True`, as `generate_custom_voice` uses them.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from helpers.adapter.c0_rows import check_c0_rows
from helpers.backends.base import Backend, Sample
from helpers.backends.languages import LANGUAGES as LANGUAGE_NAMES
from helpers.backends.qwen3 import asr
from helpers.backends.qwen3 import data
from helpers.backends.text import error_rate

TOKENIZER_12HZ = "qwen3_tts_tokenizer_12hz"
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


MIN_DRIVER_CUDA = {13: "580", 12: "525"}           # the oldest NVIDIA driver that runs a CUDA major version


def driver_cuda_version() -> str | None:
    """The CUDA version the installed NVIDIA driver supports, as nvidia-smi prints it ("12.4"), or None (no driver,
    or no nvidia-smi)."""
    import re
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        text = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", text)
    return found.group(1) if found else None


_HERE = "here"


def cuda_unavailable_reason(build: str | None = _HERE, driver: str | None = _HERE) -> str:
    """Why torch sees no CUDA device, and what to do: a CPU-only torch build (build None or ""), no NVIDIA driver
    (driver None), or a driver older than the CUDA version this torch build needs. By default this machine's:
    `torch.version.cuda`, `driver_cuda_version()`."""
    build = torch.version.cuda if build == _HERE else build
    driver = driver_cuda_version() if driver == _HERE else driver
    if not build:
        return ("this torch build has no CUDA (a CPU build); install a CUDA build of the pinned torch "
                f"({torch.__version__.split('+')[0]})")
    if driver is None:
        return f"no NVIDIA driver was found (nvidia-smi is missing or failed); this torch build needs CUDA {build}"
    need = tuple(int(x) for x in build.split(".")[:2])
    have = tuple(int(x) for x in driver.split(".")[:2])
    if have < need:
        minimum = MIN_DRIVER_CUDA.get(need[0])
        return (f"the NVIDIA driver supports CUDA {driver}, older than the CUDA {build} this torch build needs: update "
                f"the driver{f' (R{minimum} or newer)' if minimum else ''}, or install the pinned torch built for "
                f"CUDA {driver.split('.')[0]} from download.pytorch.org's matching index (e.g. .../whl/cu"
                f"{driver.replace('.', '')})")
    return (f"the driver (CUDA {driver}) is new enough for this torch build (CUDA {build}), yet no device is visible: "
            "check CUDA_VISIBLE_DEVICES and that the GPU is not held by another process")


def resolve_device(device: str) -> str:
    """'cpu', 'cuda' (only where CUDA is available) or 'auto' (CUDA if available)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was asked for, but CUDA is not available here (torch.cuda.is_available() "
                           f"is False): {cuda_unavailable_reason()}; or use device='cpu' or 'auto'")
    return device


def checkpoint_config(path: str) -> dict:
    """config.json of a Qwen3-TTS 12 Hz checkpoint (local folder or hub id); clear errors for anything else."""
    from transformers.utils import cached_file

    config, reason = None, ""
    try:
        file = cached_file(path, "config.json")
        config = json.loads(open(file).read()) if file else None
    except (OSError, ValueError) as err:
        reason = f" [{err}]"
    if config is None:
        raise ValueError(f"{path!r} is not a Qwen3-TTS checkpoint: no readable config.json there (give a local "
                         f"folder or a hub id such as Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice){reason}")
    if config.get("model_type") != "qwen3_tts":
        raise ValueError(f"{path!r} is not a Qwen3-TTS checkpoint: its config.json has "
                         f"model_type={config.get('model_type')!r}, expected 'qwen3_tts'")
    if config.get("tokenizer_type") != TOKENIZER_12HZ:
        raise ValueError(f"{path!r} uses the speech tokenizer {config.get('tokenizer_type')!r}; this project needs a "
                         f"12 Hz model ({TOKENIZER_12HZ}: 16 codebooks per 80 ms frame), such as "
                         "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice, not a 25 Hz one")
    return config


class Qwen3Backend(Backend):
    """The official model (`model`, `tts`, `speech_tokenizer`) with the run's data, voice and ASR."""

    name = "qwen3"
    non_streaming_mode = True

    def __init__(self, tts, data: "data.DataSpec", speaker: str = "", top_k: int = 50, top_p: float = 1.0,
                 temperature: float = 0.9, whisper_id: str = "openai/whisper-large-v3-turbo", asr_batch_size: int = 8,
                 inner_loop_dtype: str = "same"):
        if inner_loop_dtype != "same" and inner_loop_dtype not in DTYPES:
            raise ValueError(f"inner_loop_dtype {inner_loop_dtype!r} is not supported; allowed: same, {', '.join(DTYPES)}")
        self.tts, self.data = tts, data
        self.inner_loop_dtype = None if inner_loop_dtype == "same" else DTYPES[inner_loop_dtype]
        self.whisper_id, self.asr_batch_size = whisper_id, asr_batch_size
        self.model = tts.model.eval()
        check_c0_rows(self.model.talker, self.inner_loop_dtype)     # the inner loop's c0 lookup, at load
        self.speech_tokenizer = self.model.speech_tokenizer
        self.sample_rate = self.speech_tokenizer.get_output_sample_rate()
        self.frames_per_second = self.sample_rate / self.speech_tokenizer.get_decode_upsample_rate()
        supported = set(self.model.get_supported_languages())
        missing = [code for code in data.languages if LANGUAGE_NAMES[code] not in supported]
        if missing:
            raise ValueError(f"languages {missing} are not in this checkpoint; it has {', '.join(sorted(supported))}")
        self.languages = {code: LANGUAGE_NAMES[code] for code in data.languages}
        self.speaker = speaker.lower() or None
        if self.speaker and self.speaker not in self.model.get_supported_speakers():
            raise ValueError(f"unknown speaker {speaker!r}; this checkpoint has "
                             f"{', '.join(sorted(self.model.get_supported_speakers()))}")
        sampling = tts._merge_generate_kwargs(top_k=top_k, top_p=top_p, temperature=temperature,
                                              subtalker_top_k=top_k, subtalker_top_p=top_p,
                                              subtalker_temperature=temperature)
        sampling.pop("max_new_tokens")                         # synthesis sets its own frame budget
        self.talker_sampling = sampling
        self._records: dict[str, list[data.Record]] = {}
        self._samples: dict[str, list[Sample]] = {}
        self._asr = None
        self._normalizer = None

    @classmethod
    def load(cls, model_id_or_path: str, device: str = "auto", dtype: str = "bfloat16",
             attn_implementation: str = "eager", **settings) -> "Qwen3Backend":
        """Load a checkpoint (hub id or local folder) on `device` in `dtype`; settings: the constructor's.

        attn_implementation: the talker's. In float64 `sdpa` (the paper's parameter files) keeps its attention in
        float64; qwen_tts's `eager` takes the softmax in float32, so its states differ from sdpa's by float32 rounding
        (docs/real-model.md; tests/test_qwen3_attention.py)."""
        from qwen_tts import Qwen3TTSModel

        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r} is not supported; allowed: {', '.join(DTYPES)}")
        device = resolve_device(device)
        checkpoint_config(model_id_or_path)
        tts = Qwen3TTSModel.from_pretrained(model_id_or_path, device_map=device, dtype=DTYPES[dtype],
                                            attn_implementation=attn_implementation)
        return cls(tts, **settings)

    # -- text and audio ----------------------------------------------------------------------------
    def tokenize(self, text: str) -> torch.Tensor:
        """`<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n` as generate_custom_voice: [1, n + 8]."""
        ids = self.tts._tokenize_texts([self.tts._build_assistant_text(text)])[0]
        cfg = self.model.config
        if ids.shape[1] < 9 or ids[0, 0] != cfg.im_start_token_id or ids[0, -5] != cfg.im_end_token_id:
            raise ValueError(f"the checkpoint's processor does not give the chat format for {text!r}: {ids.tolist()}")
        return ids

    @torch.no_grad()
    def encode_audio(self, audio: np.ndarray, rate: int) -> torch.Tensor:
        """Mono float audio [n] at `rate` (resampled by the tokenizer) -> codes [T, 16] on the model's device.

        One utterance per call: in a padded batch the last frame's codes depend on the longest neighbour.
        """
        return self.speech_tokenizer.encode(audio, sr=rate).audio_codes[0].to(self.model.device, torch.long)

    def decode(self, codes: torch.Tensor) -> np.ndarray:
        """codes [T, 16] -> mono float32 audio [T * upsample] at `sample_rate`."""
        wavs, _ = self.speech_tokenizer.decode({"audio_codes": codes})
        return wavs[0]

    # -- data --------------------------------------------------------------------------------------
    def records(self, role: str) -> list[data.Record]:
        """A role's utterances before encoding (text and compressed audio), loaded once."""
        if role not in self._records:
            self._records[role] = data.load_records(self.data, role)
        return self._records[role]

    def encode(self, records: list[data.Record]) -> list[Sample]:
        """Samples of records: tokenized text and the speech tokenizer's codes of their audio."""
        codes = [self.encode_audio(*r.load()) for r in records]
        return [Sample(r.id, r.lang, r.text, self.tokenize(r.text), self.speaker, c, r.seconds)
                for r, c in zip(records, codes)]

    def samples(self, role: str) -> list[Sample]:
        if role not in self._samples:
            self._samples[role] = self.encode(self.records(role))
        return self._samples[role]

    def dataset_name(self, role: str) -> str:
        return data.dataset_name(self.data, role)

    # -- ASR ---------------------------------------------------------------------------------------
    def has_asr(self, lang: str) -> bool:
        """Whisper transcribes all six languages."""
        return lang in self.languages

    def transcribe(self, audio: list[np.ndarray], lang: str, rate: int | None = None) -> list[str]:
        """Whisper (`whisper_id`, loaded on first use) transcripts of audio at `rate` (default: sample_rate)."""
        self.language(lang)
        if self._asr is None:
            dtype = torch.float16 if self.model.device.type == "cuda" else torch.float32
            self._asr = asr.WhisperASR(self.whisper_id, self.model.device, dtype, self.asr_batch_size)
        return self._asr.transcribe(audio, rate or self.sample_rate, lang)

    def error_rate(self, refs: list[str], hyps: list[str], lang: str) -> float:
        """WER (CER for ja, zh) after Whisper's normalisers with `whisper_id`'s spelling map (loaded on first use)."""
        self.language(lang)
        if self._normalizer is None:
            self._normalizer = asr.whisper_normalizer(self.whisper_id)
        return error_rate(refs, hyps, lang, self._normalizer)
