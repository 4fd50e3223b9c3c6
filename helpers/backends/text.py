"""Text normalisation shared by the backends' error rates: numbers spelled out as English words."""

from __future__ import annotations

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_to_words(n: int) -> str:
    """Spell a non-negative integer below one million in English words."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number {n} outside 0..999999")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_to_words(rest))
    rest = n % 1000
    return number_to_words(n // 1000) + " thousand" + ("" if rest == 0 else " " + number_to_words(rest))
