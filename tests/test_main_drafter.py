"""The main drafter is chosen from the calibration set's expected tokens/step between the two offset variants."""

import pytest

from helpers.method.main_drafter import choose_main_drafter

BOTH = ["reused", "medusa", "offsets", "offsets_prenorm"]


def test_the_offset_variant_with_more_expected_tokens_wins():
    pre = choose_main_drafter(BOTH, {"offsets": 1.80, "offsets_prenorm": 1.95}, 32)
    assert pre["name"] == "offsets_prenorm" and "N=32" in pre["why"] and "offsets_prenorm 1.950" in pre["why"]
    assert pre["expected_tokens_per_step"] == {"offsets": 1.80, "offsets_prenorm": 1.95}
    assert choose_main_drafter(BOTH, {"offsets": 2.1, "offsets_prenorm": 1.9}, 32)["name"] == "offsets"
    assert choose_main_drafter(BOTH, {"offsets": 2.0, "offsets_prenorm": 2.0}, 32)["name"] == "offsets"   # tie: paper's


def test_one_or_no_offset_variant():
    assert choose_main_drafter(["reused", "offsets_prenorm"], {}, 16) == {
        "name": "offsets_prenorm", "why": "the only offset variant trained"}
    assert choose_main_drafter(["reused", "medusa"], {}, 16)["name"] == "medusa"
    with pytest.raises(ValueError, match="needs the expected tokens/step of each"):
        choose_main_drafter(BOTH, {"offsets": 2.0}, 32)
