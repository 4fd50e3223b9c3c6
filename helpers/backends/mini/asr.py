"""Offline English ASR with pocketsphinx's bundled en-us model, and WER with jiwer.

Audio at any rate is resampled to 16 kHz mono (scipy.signal.resample_poly) and decoded as
one utterance. WER after Whisper's English normaliser (helpers.backends.text), as the qwen3 backend
scores, so that one normalisation serves the project; no spelling map: the corpus and
pocketsphinx's dictionary are both American English.
"""
from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np

from helpers.backends.text import TextNormalizer, error_rate

ASR_RATE = 16000
CMN = "batch"  # per-utterance cepstral mean (and the feature state reset before each utterance, `transcribe`)
_DECODER = None
_LOCK = threading.Lock()
ENGLISH = TextNormalizer()


def _decoder():
    global _DECODER
    if _DECODER is None:
        from pocketsphinx import Decoder

        _DECODER = Decoder(samprate=ASR_RATE, loglevel="FATAL", cmn=CMN)
    return _DECODER


def to_16k(audio: np.ndarray, sr: int) -> np.ndarray:
    """Mono float audio at ``sr`` -> float32 at 16 kHz (polyphase resampling)."""
    from scipy.signal import resample_poly

    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"audio must be mono (1-D), got shape {audio.shape}")
    if sr == ASR_RATE:
        return audio
    ratio = Fraction(ASR_RATE, int(sr))
    return resample_poly(audio, ratio.numerator, ratio.denominator).astype(np.float32)


def transcribe(audio: np.ndarray, sr: int) -> str:
    """English transcript (lowercase words) of mono float audio in [-1, 1] at rate ``sr``."""
    if sr <= 0:
        raise ValueError(f"sample rate must be positive, got {sr}")
    x = to_16k(audio, sr)
    if x.size == 0:
        raise ValueError("audio is empty")
    pcm = (np.clip(x, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    with _LOCK:
        d = _decoder()
        d.reinit_feat()         # without it a transcript depends on the utterances decoded before (measured)
        d.start_utt()
        d.process_raw(pcm, full_utt=True)
        d.end_utt()
        hyp = d.hyp()
    return "" if hyp is None else hyp.hypstr


def wer(refs: list[str], hyps: list[str]) -> float:
    """Corpus-level word error rate (total edits / total reference words), Whisper-normalised."""
    return error_rate(refs, hyps, "en", ENGLISH)
