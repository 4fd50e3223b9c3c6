"""The `mini` backend: the built miniature (helpers.backends.mini.build) behind the notebooks' `Backend` interface.

Roles map onto the miniature's corpus: train -> offsets_train and validation -> offsets_val (English,
like the paper's VoxPopuli), calibration (English, like LibriSpeech), evaluation (every language, one
voice, like FLEURS). English has an offline ASR (pocketsphinx); every language has the in-domain phoneme
recogniser (`helpers.backends.mini.phoneme_asr`, trained on the pretrain speech): a phoneme error rate.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from helpers.artifacts import note
from helpers.adapter.c0_rows import check_c0_rows
from helpers.backends.base import Backend, Sample
from helpers.backends.languages import LANGUAGES
from helpers.backends.mini import asr
from helpers.backends.mini.build import MINI, SMOKE, Mini, build_mini
from helpers.backends.mini.codec import SAMPLE_RATE
from helpers.backends.mini.phoneme_asr import phoneme_error_rate, reference_tokens

ROLE_ITEMS = {"train": "offsets_train", "validation": "offsets_val", "calibration": "calibration",
              "evaluation": "evaluation"}
PRESETS = {"mini": MINI, "smoke": SMOKE}
DTYPES = {"float64": torch.float64, "float32": torch.float32}


class MiniBackend(Backend):
    name = "mini"
    sample_rate = SAMPLE_RATE

    def __init__(self, mini: Mini, languages: list[str], dtype: torch.dtype = torch.float64, talker_sampling=None,
                 inner_loop_dtype: torch.dtype | None = None):
        self.mini = mini
        self.model = mini.model.to(dtype)
        self.inner_loop_dtype = inner_loop_dtype
        check_c0_rows(self.model.talker, inner_loop_dtype)          # the inner loop's c0 lookup, at load
        self.languages = {code: LANGUAGES[code] for code in languages}
        self.talker_sampling = dict(talker_sampling or {})

    @classmethod
    def load(cls, cache_dir, preset: str = "mini", languages=("en",), device: str = "cpu", dtype: str = "float64",
             inner_loop_dtype: str = "same", seed: int = 0, train: int = 0, validation: int = 0, calibration: int = 0, evaluation: int = 0,
             top_k: int = 50, top_p: float = 1.0, temperature: float = 0.9, trained: str = "", log=note) -> "MiniBackend":
        """Build (or load from `cache_dir`/mini) the miniature of `preset` with these corpus sizes (utterances of
        the train / validation / calibration roles, and of the evaluation role per language); `seed` is the build's
        (sentences, voices, codec, training), not the run's sampling seed; `trained`: a folder of trained steps
        shipped with the repository, taken where their keys match ("": build every step). The process's torch
        threads are the caller's (a run sets one thread where it starts: `helpers.experiment.run.process`)."""
        if dtype not in DTYPES or device not in ("cpu", "auto") or inner_loop_dtype not in ("same", *DTYPES):
            raise ValueError(f"the mini backend runs on device cpu in {' or '.join(DTYPES)} (inner loop: same or "
                             f"either); got device={device!r}, dtype={dtype!r}, inner_loop_dtype={inner_loop_dtype!r}")
        if preset not in PRESETS:
            raise ValueError(f"unknown mini preset {preset!r}; allowed: {', '.join(PRESETS)}")
        cfg = replace(PRESETS[preset], seed=seed, offsets_train=train, offsets_val=validation,
                      calibration=calibration, evaluation=evaluation)
        sampling = dict(top_k=top_k, top_p=top_p, temperature=temperature, subtalker_top_k=top_k,
                        subtalker_top_p=top_p, subtalker_temperature=temperature)
        mini = build_mini(cfg, Path(cache_dir) / "mini", log=log, recogniser_beside=True, shipped=trained or None)
        return cls(mini, languages, DTYPES[dtype], sampling, DTYPES.get(inner_loop_dtype))

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

    def decode_levels(self, codes: torch.Tensor, levels: int) -> np.ndarray:
        """codes [T, 16] decoded with their first `levels` levels only (1..16; 16 is `decode`)."""
        if not 1 <= levels <= codes.shape[1]:
            raise ValueError(f"levels must be in 1..{codes.shape[1]}, got {levels}")
        return self.mini.codec.decode(codes.cpu().numpy(), stages=levels)

    @property
    def codebook_sizes(self) -> list[int]:
        """The miniature codec's own codebook sizes for c1..c15 (smaller than the predictor's vocabulary)."""
        return list(self.mini.codec.sizes[1:])

    @property
    def code_sizes(self) -> list[int]:
        """All 16 of the codec's codebook sizes (c0: its phoneme symbols, for the semantic c0)."""
        return list(self.mini.codec.sizes)

    def has_asr(self, lang: str) -> bool:
        return lang == "en"

    def transcribe(self, audio: list[np.ndarray], lang: str) -> list[str]:
        if not self.has_asr(lang):
            raise ValueError(f"the mini backend has an ASR for English only, not {lang!r}")
        return [asr.transcribe(a, self.sample_rate) for a in audio]

    def error_rate(self, refs: list[str], hyps: list[str], lang: str) -> float:
        return asr.wer(refs, hyps)

    def has_phoneme_asr(self, lang: str) -> bool:
        return lang in self.languages

    def _items(self, samples: list[Sample]):
        role_index = [s.id.split("/") for s in samples]        # ids are "<role>/<index in the role's items>"
        return [self.mini.items[ROLE_ITEMS[role]][int(i)] for role, i in role_index]

    def reference_phonemes(self, samples: list[Sample]) -> list[list[str]]:
        return [reference_tokens(it.phonemes) for it in self._items(samples)]

    def reference_audio(self, samples: list[Sample]) -> list[np.ndarray]:
        """The espeak ground truth (16 kHz, the codec's rate)."""
        return [self.mini.audio(it) for it in self._items(samples)]

    def recognise_phonemes(self, audio: list[np.ndarray]) -> list[list[str]]:
        return self.mini.recogniser()[0].recognise(audio)

    def phoneme_recogniser_history(self) -> dict:
        return self.mini.recogniser()[1]

    def phoneme_error_rate(self, refs: list[list[str]], hyps: list[list[str]]) -> float:
        return phoneme_error_rate(refs, hyps)

    def dataset_name(self, role: str) -> str:
        return "mini corpus, espeak-ng"
