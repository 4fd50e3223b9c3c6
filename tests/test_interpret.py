"""The sentences that interpret a run's numbers (helpers.report.nb02_drafters, nb03_tree, nb04_decoding, nb05_quality,
losslessness, quality_parity):
gaps, the tree / drafter split, the paired test and its power."""

import pytest

from helpers.report.nb03_tree import room_sentence
from helpers.report.nb04_decoding import expected_gaps, gap_sentence, language_lead_sentence, tree_drafter_split
from helpers.report.nb05_quality import intelligibility, paired_test
from helpers.report.quality_parity import asr_has_signal


def test_gaps_and_their_sentence():
    gaps = expected_gaps({"medusa": 1.95, "reused": 1.96}, {"medusa": 2.03, "reused": 1.99})
    assert gaps == pytest.approx({"medusa": -0.08, "reused": -0.03})
    text = gap_sentence(gaps, {"en": -0.02, "de": -0.05}, "offsets", 32)
    assert "medusa -0.080" in text and "largest shortfall is medusa's" in text and "spread of 0.030" in text
    with pytest.raises(ValueError, match="different drafters"):
        expected_gaps({"medusa": 1.0}, {"reused": 1.0})


def test_each_drafters_lead_per_language_and_where_it_is_largest():
    by_language = {"reused": {"en": 2.0, "de": 2.1}, "medusa": {"en": 2.3, "de": 2.15}, "offsets": {"en": 2.0, "de": 2.2}}
    text = language_lead_sentence(by_language, ["en"], 32)
    assert "medusa en +0.300, de +0.050 (largest on en, a training language; smallest on de)" in text
    assert "offsets en +0.000, de +0.100 (largest on de, not a training language; smallest on en)" in text
    assert "at N = 32" in text and "trained on en frames only" in text


def test_the_room_is_the_ideal_drafters_lead_over_the_reused_heads():
    text = room_sentence({"reused": {32: 2.07}, "medusa": {32: 2.13}}, {16: 2.15, 32: 2.36}, 32)
    assert "would expect 2.360" in text and "reused 2.070 (-0.290)" in text and "medusa 2.130 (-0.230)" in text
    assert "lead over the reused heads, +0.290," in text
    assert "lead over" not in room_sentence({"medusa": {32: 2.13}}, {32: 2.36}, 32)


def test_the_split_adds_up():
    s = tree_drafter_split(1.5, 1.9, 2.0)
    assert s["tree"] == pytest.approx(0.4) and s["drafter"] == pytest.approx(0.1) and s["total"] == pytest.approx(0.5)


def test_the_paired_test_finds_a_real_difference_and_not_a_null_one():
    a = [[0.80, 0.70, 0.90, 0.60, 0.75, 0.85]] * 2
    shifted = [[x + 0.1 + 0.01 * i for i, x in enumerate(row)] for row in a]
    found = paired_test(a, shifted)
    assert found["p"] < 0.001 and found["ci"][0] > 0 and found["diff"] == pytest.approx(0.125)
    same = paired_test(a, a)
    assert same["p"] == 1.0 and same["ci"] == [0.0, 0.0]
    noisy = paired_test(a, [[x + (0.05 if i % 2 else -0.05) for i, x in enumerate(row)] for row in a])
    assert noisy["p"] > 0.5 and noisy["ci"][0] < 0 < noisy["ci"][1] and noisy["detectable"] > 0.05
    with pytest.raises(ValueError, match="at least 2 utterances"):
        paired_test([[0.5]], [[0.5]])


def test_intelligibility_and_asr_signal():
    assert "mostly unintelligible (PER 84.0%; original audio 24.0%" in intelligibility(0.24, 0.40, 0.84)
    assert asr_has_signal(0.99) is False and asr_has_signal(0.3) is True and asr_has_signal(None) is None


def test_exact_mode_prints_no_chi_square_that_cannot_fail():
    from helpers.report.losslessness import lossless_lines
    par = {"p_values": [1.0] * 16, "p_min_adjusted": 1.0, "rejected": False, "samples": [10, 10], "alpha": 0.001}
    lo = {"frames_identical": 10, "frames_compared": 10, "exact": True, "inner_loop_dtype": "float64", "parity": par}
    exact = "\n".join(lossless_lines(lo, "float64"))
    assert "p per position" not in exact and "cannot fail" in exact
    deployment = "\n".join(lossless_lines({**lo, "exact": False, "frames_identical": 9}, "float32"))
    assert "p per position" in deployment


def test_the_training_sentence_says_how_each_drafter_stopped():
    from helpers.report.nb02_drafters import training_sentence
    t = {"medusa": {"lr": 0.001, "best_epoch": 6, "val_loss": [101, 90, 85, 83, 82, 81.5, 81.0, 81.2, 81.3]},
         "offsets": {"lr": 0.003, "best_epoch": 10, "val_loss": [101] + [100 - 0.1 * i for i in range(10)]}}
    text = training_sentence(t, 10, [0.001, 0.003])
    assert "medusa stopped early after 8 of at most 10 epochs (kept epoch 6)" in text
    assert "offsets ran to the cap of 10 epochs with the held-out loss still falling" in text
    assert "the largest learning rate of the sweep (0.003" in text and "the smallest learning rate" in text
    assert "at learning rate 0.001" in training_sentence(t, 10, [0.001])
