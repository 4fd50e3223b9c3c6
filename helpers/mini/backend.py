"""The `mini` backend: the built miniature (helpers.mini.build) behind the notebooks' `Backend` interface.

Roles map onto the miniature's corpus: train -> offsets_train and validation -> offsets_val (English,
like the paper's VoxPopuli), calibration (English, like LibriSpeech), evaluation (every language, one
voice, like FLEURS). English has an offline ASR (pocketsphinx); the other languages have none.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ..backend import Backend, Sample
from ..params import RunParams
from . import asr
from .build import MINI, SMOKE, Mini, build_mini
from .codec import SAMPLE_RATE
from .model import LANGUAGES

ROLE_ITEMS = {"train": "offsets_train", "validation": "offsets_val", "calibration": "calibration",
              "evaluation": "evaluation"}
PRESETS = {"mini": MINI, "smoke": SMOKE}
DTYPES = {"float64": torch.float64, "float32": torch.float32}


class MiniBackend(Backend):
    name = "mini"
    sample_rate = SAMPLE_RATE

    def __init__(self, mini: Mini, languages: list[str], dtype: torch.dtype = torch.float64, talker_sampling=None):
        self.mini = mini
        self.model = mini.model.to(dtype)
        self.languages = {code: LANGUAGES[code] for code in languages}
        self.talker_sampling = dict(talker_sampling or {})

    @classmethod
    def from_params(cls, P: RunParams, log=print) -> "MiniBackend":
        """Build (or load from the cache) the miniature of `P.mini_preset` with P's corpus sizes."""
        if P.dtype not in DTYPES or P.device != "cpu" and P.device != "auto":
            raise ValueError(f"the mini backend runs on device cpu in {' or '.join(DTYPES)}; "
                             f"got device={P.device!r}, dtype={P.dtype!r}")
        cfg = replace(PRESETS[P.mini_preset], seed=P.seed, offsets_train=P.train_samples,
                      offsets_val=P.validation_samples, calibration=P.calibration_samples,
                      evaluation=P.eval_samples_per_language)
        torch.set_num_threads(1)             # tiny matrices: one thread is fastest (and not 15x slower under load)
        sampling = dict(top_k=P.top_k, top_p=P.top_p, temperature=P.temperature, subtalker_top_k=P.top_k,
                        subtalker_top_p=P.top_p, subtalker_temperature=P.temperature)
        return cls(build_mini(cfg, Path(P.cache_dir) / "mini", log=log), P.languages, DTYPES[P.dtype], sampling)

    def samples(self, role: str) -> list[Sample]:
        if role not in ROLE_ITEMS:
            raise ValueError(f"unknown role {role!r}; allowed: {', '.join(ROLE_ITEMS)}")
        items = self.mini.items[ROLE_ITEMS[role]]
        return [Sample(f"{role}/{i:04d}", it.lang, it.text, self.mini.vocab.chat_ids(it.phonemes), it.speaker,
                       it.codes, seconds=it.codes.shape[0] / self.frames_per_second)
                for i, it in enumerate(items) if it.lang in self.languages]

    def max_frames(self, sample: Sample) -> int:
        return sample.input_ids.shape[1] - 8 + 25          # one phoneme per frame, and some slack

    def decode(self, codes: torch.Tensor) -> np.ndarray:
        return self.mini.codec.decode(codes.cpu().numpy())

    def has_asr(self, lang: str) -> bool:
        return lang == "en"

    def transcribe(self, audio: list[np.ndarray], lang: str) -> list[str]:
        if not self.has_asr(lang):
            raise ValueError(f"the mini backend has an ASR for English only, not {lang!r}")
        return [asr.transcribe(a, self.sample_rate) for a in audio]

    def error_rate(self, refs: list[str], hyps: list[str], lang: str) -> float:
        return asr.wer(refs, hyps)

    def dataset_name(self, role: str) -> str:
        return "mini corpus, espeak-ng"
