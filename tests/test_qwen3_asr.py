"""Whisper-style normalisation and error rates of the qwen3 backend's ASR."""

import pytest

from helpers.backends.qwen3.asr import error_rate, normalize


@pytest.mark.parametrize("lang,text,expected", [
    ("en", "Hello, (laughs) Mr. O'Neil's 1,250 cats & 3.5% uh dogs!", "hello mr o'neil's one thousand two hundred "
     "fifty cats and three point five percent dogs"),
    ("en", "'Quoted' [noise] words", "quoted words"),
    ("de", "Straße, „Grüße“ – 12!", "straße grüße 12"),
    ("ru", "Привет, МИР!", "привет мир"),
    ("ja", "こんにちは、 世界！", "こんにちは世界"),
    ("zh", "你好，世界。", "你好世界"),
])
def test_normalize(lang, text, expected):
    assert normalize(text, lang) == expected


def test_error_rates_are_word_level_except_ja_zh():
    assert error_rate(["The cat sat.", "A dog"], ["the cat sat", "the dog"], "en") == pytest.approx(1 / 5)
    assert error_rate(["你好世界"], ["你好 世"], "zh") == pytest.approx(1 / 4)
    assert error_rate(["こんにちは"], ["こんばんは"], "ja") == pytest.approx(2 / 5)
    assert error_rate(["Hello world"], [""], "en") == 1.0
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        error_rate(["a", "b"], ["a"], "en")
    with pytest.raises(ValueError, match="at least one word"):
        error_rate(["(laughs)"], ["x"], "en")
