"""Text normalisation and error rates as ASR is scored in the field: Whisper's own normalisers, as `transformers`
ships them (the Open ASR Leaderboard and Whisper's papers score this way).

    norm = TextNormalizer(spelling)        # spelling: the Whisper checkpoint's English spelling map (normalizer.json)
    norm("Mr. Smith's 2 colours", "en")    # -> "mister smith is 2 colors"
    error_rate(refs, hyps, "zh", norm)     # corpus WER; CER for ja and zh

English: `EnglishTextNormalizer` (contractions, titles, numbers to digits, British to American spelling); every other
language: `BasicTextNormalizer` (lower case, symbols and punctuation to spaces, NFKC). Mandarin is converted to
simplified characters (OpenCC's t2s table, `opencc-purepy`) before its CER; ja and zh are compared character by
character with spaces removed. A reference is what the TTS was asked to speak, so none of it is dropped: brackets are
removed but their words kept, and English fillers (uh, um, hmm) are kept (Whisper's normalisers delete both, as
human transcripts mark non-speech that way).
"""

from __future__ import annotations

from functools import lru_cache

from helpers.backends.languages import SIMPLIFIED, SPACELESS

BRACKETS = str.maketrans({c: " " for c in "()[]<>"})
NEVER = r"(?!x)x"                              # a pattern that matches nothing


@lru_cache(maxsize=1)
def _to_simplified():
    from opencc_purepy import OpenCC

    return OpenCC("t2s").convert


def to_simplified(text: str) -> str:
    """Traditional Chinese characters -> simplified (OpenCC t2s: character by character, no phrase rewriting)."""
    return _to_simplified()(text)


class TextNormalizer:
    """Whisper's English normaliser with a spelling map, and its basic normaliser for the other languages."""

    def __init__(self, spelling: dict[str, str] | None = None):
        from transformers.models.whisper.english_normalizer import BasicTextNormalizer, EnglishTextNormalizer

        self.english = EnglishTextNormalizer(dict(spelling or {}))
        self.english.ignore_patterns = NEVER           # keep fillers: the TTS speaks them
        self.basic = BasicTextNormalizer()

    def __call__(self, text: str, lang: str) -> str:
        text = text.translate(BRACKETS)
        out = self.english(text) if lang == "en" else self.basic(text)
        if lang in SIMPLIFIED:
            out = to_simplified(out)
        return out.replace(" ", "") if lang in SPACELESS else " ".join(out.split())


def error_rate(refs: list[str], hyps: list[str], lang: str, normalize: TextNormalizer) -> float:
    """Corpus WER (CER for ja, zh) after `normalize`: total edits / total reference words (characters)."""
    import jiwer

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    r = [normalize(x, lang) for x in refs]
    h = [normalize(x, lang) for x in hyps]
    if not r or any(not x for x in r):
        raise ValueError("every reference must keep at least one word after normalisation")
    return float(jiwer.cer(r, h) if lang in SPACELESS else jiwer.wer(r, h))
