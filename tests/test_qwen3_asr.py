"""Text normalisation for error rates (Whisper's normalisers, as transformers ships them) and the error rates."""

import pytest

from helpers.backends.qwen3.asr import whisper_normalizer
from helpers.backends.text import TextNormalizer, error_rate, to_simplified

SPELLING = {"colours": "colors", "favourite": "favorite"}     # entries of Whisper's english.json


@pytest.mark.parametrize("lang,text,expected", [
    ("en", "Mr. Smith's 2 colours", "mister smith is 2 colors"),                   # title, contraction, spelling
    ("en", "It costs $3.50 in 1,250 days, about twenty five dollars.", "it costs $3.50 in 1250 days about $25"),
    ("en", "I won't (quietly) say um [softly] my favourite word!", "i will not quietly say um softly my favorite word"),
    ("de", "Straße, „Grüße“ – 12!", "straße grüße 12"),
    ("es", "¿Qué tal? (Bien)", "qué tal bien"),
    ("ru", "Привет, МИР!", "привет мир"),
    ("ja", "こんにちは、 世界！", "こんにちは世界"),
    ("zh", "這是臺灣的電腦。", "这是台湾的电脑"),                                   # traditional -> simplified
    ("zh", "你好，世界。", "你好世界"),
])
def test_normalize(lang, text, expected):
    assert TextNormalizer(SPELLING)(text, lang) == expected


def test_simplified_and_bracket_words_are_kept():
    assert to_simplified("後來的國語") == "后来的国语"
    norm = TextNormalizer()
    assert norm("The (rare) word", "en") == "the rare word"          # the TTS speaks it: no word dropped
    assert norm("colours", "en") == "colours"                         # no spelling map: no spelling change


def test_error_rates_are_word_level_except_ja_zh():
    norm = TextNormalizer(SPELLING)
    assert error_rate(["The cat sat.", "A dog"], ["the cat sat", "the dog"], "en", norm) == pytest.approx(1 / 5)
    assert error_rate(["It's my favourite colours"], ["it is my favorite colors"], "en", norm) == 0.0
    assert error_rate(["你好世界"], ["你好 世"], "zh", norm) == pytest.approx(1 / 4)
    assert error_rate(["電腦"], ["电脑"], "zh", norm) == 0.0                    # scripts do not count as errors
    assert error_rate(["こんにちは"], ["こんばんは"], "ja", norm) == pytest.approx(2 / 5)
    assert error_rate(["Hello world"], [""], "en", norm) == 1.0
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        error_rate(["a", "b"], ["a"], "en", norm)
    with pytest.raises(ValueError, match="at least one word"):
        error_rate(["!?"], ["x"], "en", norm)


def test_the_whisper_checkpoint_spelling_map(qwen3_tiny, tmp_path):
    from qwen3_tiny import SPELLING as TINY
    norm = whisper_normalizer(str(qwen3_tiny["whisper"]))
    assert norm.english.standardize_spellings.mapping == TINY and norm("colours", "en") == "colors"
    bare = tmp_path / "whisper"
    bare.mkdir()
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        if (qwen3_tiny["whisper"] / name).exists():
            (bare / name).write_bytes((qwen3_tiny["whisper"] / name).read_bytes())
    with pytest.raises(ValueError, match="ships no English spelling map"):
        whisper_normalizer(str(bare))
