"""What the notebooks need from a backend, whichever model sits behind it.

A backend wraps an official `Qwen3TTSForConditionalGeneration` (the miniature, or the real
Qwen3-TTS-12Hz-0.6B-CustomVoice) with its data and its audio side:

    backend.samples("evaluation")        # list[Sample] of a role: train, validation, calibration, evaluation
    backend.teacher_forced(samples)      # talker states g [F, H] and codes [F, 16] over every frame
    backend.synthesize(sample, decoder, seed)   # free-running, official generate, our inner loop switched in
    backend.decode(codes)                # codes [T, 16] -> mono float audio at backend.sample_rate
    backend.transcribe(audio, lang)      # ASR transcripts (backend.has_asr(lang) says where there is one)

Teacher forcing and synthesis are the same for every backend (they only use the official model and
`helpers.adapter.talker_inputs`); data, audio and ASR are the backend's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
import torch
from torch import nn

from helpers.method.decoding import decoder_core
from helpers.method.stack import FusedCore
from helpers.method.predictor import CodePredictor
from helpers.adapter.synthesis import Synthesis, synthesize
from helpers.adapter.talker_inputs import Utterance, talker_states

ROLES = ("train", "validation", "calibration", "evaluation")


@dataclass
class Sample:
    """One utterance: chat-formatted text ids [1, n + 8], language code, speaker, ground-truth codes [T, 16]."""

    id: str
    lang: str
    text: str
    input_ids: torch.Tensor
    speaker: str | None
    codes: torch.Tensor | None = None
    seconds: float = 0.0


class Backend:
    """Base class: subclasses set `name`, `model`, `languages`, `sample_rate`, and implement the data side."""

    name: str = "?"
    model: nn.Module
    languages: dict[str, str]              # language code -> the official language name (en -> english)
    sample_rate: int
    non_streaming_mode: bool = False       # the talker prompt layout used for teacher forcing and synthesis
    talker_sampling: dict = {}             # top_k, temperature, ... for c0 (the official generate's defaults if empty)
    frames_per_second: float = 12.5

    inner_loop_dtype: torch.dtype | None = None   # the inner loop's dtype (code predictor, drafters); None: the model's

    @cached_property
    def predictor(self) -> CodePredictor:
        """The inner loop every decoder runs, built on first use and held by the backend (one object, the one synthesis
        uses): the talker's own code predictor, or a copy of it and of E0 in `inner_loop_dtype`. The talker keeps the
        model's dtype."""
        return CodePredictor.from_talker(self.model.talker, dtype=self.inner_loop_dtype)

    @cached_property
    def core(self) -> FusedCore:
        """The fused weight copies of `predictor`, deep enough for any tree (`decoder_core`: for a dense predictor
        its own stack, the copies its calls run): its AR synthesis runs on them and decoders built with
        `core=backend.core` share them (one copy per backend, however many syntheses and decoders)."""
        return decoder_core(self.predictor)

    @property
    def codebook_sizes(self) -> list[int]:
        """Entries of the codec's codebooks c1..c15 (the predictor's vocabulary unless the codec says otherwise)."""
        return [self.predictor.vocab_size] * self.predictor.num_codes

    @property
    def code_sizes(self) -> list[int]:
        """Entries of all 16 codebooks, c0 (the talker's) first."""
        return [self.predictor.vocab_size] + self.codebook_sizes

    # -- data, audio and ASR: the backend's own -------------------------------------------------
    def samples(self, role: str) -> list[Sample]:
        raise NotImplementedError

    def decode(self, codes: torch.Tensor) -> np.ndarray:
        raise NotImplementedError

    def has_asr(self, lang: str) -> bool:
        """Whether `transcribe` can transcribe this language."""
        raise NotImplementedError

    def transcribe(self, audio: list[np.ndarray], lang: str) -> list[str]:
        raise NotImplementedError

    def error_rate(self, refs: list[str], hyps: list[str], lang: str) -> float:
        """Corpus WER (CER where words are not space-separated) of transcripts against references."""
        raise NotImplementedError

    def dataset_name(self, role: str) -> str:
        raise NotImplementedError

    def has_phoneme_asr(self, lang: str) -> bool:
        """Whether `recognise_phonemes` serves this language (a phoneme error rate, PER); none by default."""
        return False

    def reference_phonemes(self, samples: list[Sample]) -> list[list[str]]:
        """The phoneme tokens each sample speaks (PER references)."""
        raise NotImplementedError(f"backend {self.name} has no phoneme references")

    def reference_audio(self, samples: list[Sample]) -> list[np.ndarray] | None:
        """The samples' original audio (mono, `sample_rate`), where the backend keeps it; None if it does not."""
        return None

    def recognise_phonemes(self, audio: list[np.ndarray]) -> list[list[str]]:
        """Phoneme tokens recognised in each clip (mono float audio at `sample_rate`)."""
        raise NotImplementedError(f"backend {self.name} has no phoneme recogniser")

    def phoneme_recogniser_history(self) -> dict | None:
        """The phoneme recogniser's training record (loss and validation PER per epoch, seconds, ...), or None."""
        return None

    def phoneme_error_rate(self, refs: list[list[str]], hyps: list[list[str]]) -> float:
        """Corpus PER: total phoneme edits / total reference phonemes."""
        raise NotImplementedError(f"backend {self.name} has no phoneme recogniser")

    def max_frames(self, sample: Sample) -> int:
        """Frame budget of free-running synthesis for a sample."""
        if sample.codes is not None:
            return 2 * sample.codes.shape[0] + 25
        return int(sample.input_ids.shape[1] * 2 + 50)

    # -- shared: teacher forcing and synthesis through the official model -----------------------
    def language(self, lang: str) -> str:
        if lang not in self.languages:
            raise ValueError(f"unknown language {lang!r} for backend {self.name}; allowed: {', '.join(self.languages)}")
        return self.languages[lang]

    @torch.no_grad()
    def teacher_forced(self, samples: list[Sample], batch_size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
        """Talker states g [F, H_talker] and ground-truth codes [F, 16] over every frame of the samples."""
        missing = [s.id for s in samples if s.codes is None]
        if missing:
            raise ValueError(f"teacher forcing needs ground-truth codes; missing for {missing[:5]}")
        data = [Utterance(s.input_ids, self.language(s.lang), s.speaker, s.codes) for s in samples]
        states = talker_states(self.model, data, batch_size=batch_size, non_streaming=self.non_streaming_mode)
        return torch.cat(states), torch.cat([s.codes for s in samples])

    def synthesize(self, sample: Sample, decoder="ar", seed: int = 0, temperature: float | None = None) -> Synthesis:
        """Free-running synthesis of one sample through the official generate (our inner loop in place);
        `temperature` replaces the backend's for c0 and the inner loop alike (the parity test's control).
        decoder: "ar" (AR `Decoder`s on the backend's `core`) or a `Decoder` of `predictor`."""
        sampling = dict(self.talker_sampling)
        if temperature is not None:
            if not temperature > 0:
                raise ValueError(f"temperature must be > 0, got {temperature}")
            sampling.update(temperature=temperature, subtalker_temperature=temperature)
        return synthesize(self.model, sample.input_ids, self.language(sample.lang), sample.speaker, decoder,
                          seed=seed, max_frames=self.max_frames(sample), non_streaming_mode=self.non_streaming_mode,
                          core=self.core, **sampling)

    def dataset_table(self, samples_of: Callable[[str], list[Sample]] | None = None, roles=ROLES) -> list[dict]:
        """The paper's Table 1 shape, from the samples actually used (`samples_of(role)`, default `self.samples`):
        stage, dataset, language, samples, hours, frames."""
        rows = []
        for role in roles:
            by_lang: dict[str, list[Sample]] = {}
            for s in (samples_of or self.samples)(role):
                by_lang.setdefault(s.lang, []).append(s)
            for lang, group in by_lang.items():
                frames = sum(0 if s.codes is None else s.codes.shape[0] for s in group)
                seconds = sum(s.seconds for s in group)
                rows.append(dict(stage=role, dataset=self.dataset_name(role), language=self.languages[lang],
                                 samples=len(group), hours=seconds / 3600, frames=frames))
        return rows
