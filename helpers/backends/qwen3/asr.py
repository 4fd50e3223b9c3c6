"""ASR for the `qwen3` backend: Whisper through `transformers` in a forced language, and error rates with jiwer.

    asr = WhisperASR("openai/whisper-large-v3-turbo", device="cuda", dtype=torch.float16)
    hyps = asr.transcribe([audio], rate=24000, lang="de")          # audio: mono float [n] at `rate`
    error_rate(refs, hyps, "de")                                   # WER; CER for ja and zh

Normalisation, in the spirit of Whisper's normalisers (our own, simpler): NFKC, lower case, bracketed
spans dropped, punctuation and symbols become spaces. English also drops fillers (uh, um, ...), spells
out numbers (1,250 -> one thousand two hundred fifty) and keeps in-word apostrophes. ja and zh are
compared character by character with all spaces removed.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import torch

from helpers.backends.languages import SPACELESS
from helpers.backends.text import number_to_words

ASR_RATE = 16000
FILLERS = {"uh", "um", "umm", "hmm", "mm", "mhm", "mmm", "er", "erm", "ah"}


def _spell_numbers(text: str) -> str:
    def spell(m: re.Match) -> str:
        whole, _, frac = m.group().replace(",", "").partition(".")
        if len(whole) > 6:
            return m.group()
        words = number_to_words(int(whole))
        return f" {words} point {' '.join(number_to_words(int(d)) for d in frac)} " if frac else f" {words} "
    return re.sub(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", spell, text)


def normalize(text: str, lang: str) -> str:
    """Whisper-style normalised text (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[<\[][^>\]]*[>\]]|\([^)]*\)", " ", text)
    if lang == "en":
        text = _spell_numbers(text.replace("%", " percent ").replace("&", " and "))
    keep = "'" if lang == "en" else ""
    text = "".join(" " if unicodedata.category(c)[0] in "PS" and c not in keep else c for c in text)
    if lang == "en":
        text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
        text = " ".join(w for w in text.split() if w not in FILLERS)
    text = " ".join(text.split())
    return text.replace(" ", "") if lang in SPACELESS else text


def error_rate(refs: list[str], hyps: list[str], lang: str) -> float:
    """Corpus WER (CER for ja, zh) after `normalize`: total edits / total reference words (characters)."""
    import jiwer

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    r = [normalize(x, lang) for x in refs]
    h = [normalize(x, lang) for x in hyps]
    if not r or any(not x for x in r):
        raise ValueError("every reference must keep at least one word after normalisation")
    return float(jiwer.cer(r, h) if lang in SPACELESS else jiwer.wer(r, h))


class WhisperASR:
    """A Whisper checkpoint (hub id or local folder) and its processor, in eval mode."""

    def __init__(self, model_id: str, device: str = "cpu", dtype: torch.dtype = torch.float32, batch_size: int = 8):
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        self.processor = WhisperProcessor.from_pretrained(model_id)
        self.model = WhisperForConditionalGeneration.from_pretrained(model_id, dtype=dtype).to(device).eval()
        self.batch_size = batch_size
        self.languages = {k[2:-2] for k in getattr(self.model.generation_config, "lang_to_id", {})}

    @torch.no_grad()
    def transcribe(self, audio: list[np.ndarray], rate: int, lang: str) -> list[str]:
        """Transcripts of mono float audio at `rate`, decoded in language `lang` (Whisper's code: en, de, ...)."""
        import librosa

        if lang not in self.languages:
            raise ValueError(f"this Whisper has no language {lang!r}; it has {', '.join(sorted(self.languages))}")
        out = []
        for start in range(0, len(audio), self.batch_size):
            batch = [librosa.resample(np.asarray(a, dtype=np.float32), orig_sr=rate, target_sr=ASR_RATE)
                     for a in audio[start:start + self.batch_size]]
            inputs = self.processor(batch, sampling_rate=ASR_RATE, return_tensors="pt", truncation=False,
                                    padding="longest", return_attention_mask=True)
            if inputs.input_features.shape[-1] < 3000:      # short form: Whisper's fixed 30 s window
                inputs = self.processor(batch, sampling_rate=ASR_RATE, return_tensors="pt", return_attention_mask=True)
            inputs = inputs.to(self.model.device)
            ids = self.model.generate(inputs.input_features.to(self.model.dtype), attention_mask=inputs.attention_mask,
                                      language=lang, task="transcribe")
            out += [t.strip() for t in self.processor.batch_decode(ids, skip_special_tokens=True)]
        return out
