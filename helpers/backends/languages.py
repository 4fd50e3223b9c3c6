"""The one table of the project's languages: one row per language code, every per-language fact in it.

The paper's six languages. Codes are what params files, tables and metrics use. Per row: `name`, the official
`qwen_tts` language name (what the talker's prompt and `generate(languages=...)` take); `espeak`, the espeak-ng
voice the miniature speaks it with; `fleurs`, its FLEURS config (the qwen3 backend's evaluation data); `script`,
its writing system (ISO 15924; "Hans": scored in simplified characters); `spaceless`: written without spaces
between words, so error rates there are character error rates.

    language("zh").fleurs      # -> "cmn_hans_cn"; an unknown code raises ValueError naming the allowed ones

`LANGUAGES` (code -> official name), `CODES`, `SPACELESS` and `SIMPLIFIED` are views of the table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """One language: its code and every fact the project keeps about it."""

    code: str
    name: str
    espeak: str
    fleurs: str
    script: str
    spaceless: bool


TABLE = {row.code: row for row in (
    #        code  official name  espeak   FLEURS          script  spaceless
    Language("en", "english",     "en-us", "en_us",        "Latn", False),
    Language("de", "german",      "de",    "de_de",        "Latn", False),
    Language("es", "spanish",     "es",    "es_419",       "Latn", False),
    Language("ru", "russian",     "ru",    "ru_ru",        "Cyrl", False),
    Language("ja", "japanese",    "ja",    "ja_jp",        "Jpan", True),
    Language("zh", "chinese",     "cmn",   "cmn_hans_cn",  "Hans", True),
)}
LANGUAGES = {code: row.name for code, row in TABLE.items()}
CODES = tuple(TABLE)
SPACELESS = tuple(code for code, row in TABLE.items() if row.spaceless)
SIMPLIFIED = tuple(code for code, row in TABLE.items() if row.script == "Hans")


def language(code: str) -> Language:
    """The row of `code`; ValueError for a code outside the table, naming the allowed ones."""
    if code not in TABLE:
        raise ValueError(f"unknown language {code!r}; allowed: {', '.join(CODES)}")
    return TABLE[code]
