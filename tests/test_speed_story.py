"""The speed story's numbers and the sentences that interpret them (`helpers.report.latency_sweep`,
`helpers.report.nb06_latency`, `helpers.report.projection`, `helpers.report.deployments`, `helpers.report.paper`):
each sentence is checked against the numbers it was built from, so a sentence that contradicted them (a direction
assumed, a best N explained by a trend the sweep does not show, a derived or inferred paper value called the paper's)
fails here."""

import pytest

from helpers.report.latency_sweep import best_n_sentence, call_cost_sentence, measured_against_realised
from helpers.report.nb06_latency import three_estimates
from helpers.report.paper import ceiling_provenance, ceiling_text, paper_arithmetic
from helpers.report.projection import fastest_exact_ar, projection_at, projection_sentence

GRID = {"rounds": 3,
        "w8a8": {"ar_ms": 5.0, "by_n": {"32": {"call_ms": 40.0, "overhead": 7.0}}},
        "w8a16": {"ar_ms": 12.0, "by_n": {"32": {"call_ms": 72.0, "overhead": 5.0}}},
        "bfloat16-prepacked": {"ar_ms": 13.0, "by_n": {"16": {"call_ms": 20.0, "overhead": 0.54},
                                                       "32": {"call_ms": 36.0, "overhead": 1.77}}}}


def test_the_paper_points_say_where_they_come_from():
    assert ceiling_provenance(16) == "paper" and ceiling_provenance(64) == "paper"
    assert ceiling_provenance(32) == "inferred" and ceiling_provenance(24) is None
    assert ceiling_text(32) == "2.47 (inferred)" and ceiling_text(16) == "2.25" and ceiling_text(8) == "-"


def test_the_projection_is_against_the_fastest_ar_call_of_its_own_grid():
    assert fastest_exact_ar(GRID) == ("w8a8", 5.0)                   # every kernel's rows are its AR call's
    p = projection_at(GRID, 32)
    assert p["best"] == "bfloat16-prepacked" and p["source"] == "inferred"
    assert p["rows"]["bfloat16-prepacked"]["over_fastest_exact_ar"] == pytest.approx(2.47 * 5 / 36)
    assert p["rows"]["bfloat16-prepacked"]["over_own_ar"] == pytest.approx(2.47 / 2.77)
    text = projection_sentence(p)
    assert f"**{2.47 * 5 / 36:.2f}x** against the fastest AR call" in text and "(inferred)" in text
    assert "w8a8, 5.00 ms" in text and "Projected" in text and "flatters its slower AR call" in text
    with pytest.raises(ValueError, match="no tokens/step at N = 24"):
        projection_at(GRID, 24)                                      # never a value the paper does not give
    with pytest.raises(ValueError, match="no deployment in the grid"):
        fastest_exact_ar({"rounds": 3})


BY_N = {"4": {"overhead": 0.9, "tokens_per_step": 1.6, "realised_speedup": 0.84, "measured_speedup": 0.91},
        "8": {"overhead": 1.0, "tokens_per_step": 1.8, "realised_speedup": 0.90, "measured_speedup": 0.93},
        "16": {"overhead": 1.2, "tokens_per_step": 1.9, "realised_speedup": 0.86, "measured_speedup": 0.90},
        "32": {"overhead": 1.5, "tokens_per_step": 2.0, "realised_speedup": 0.83, "measured_speedup": 0.79}}


def test_measured_against_realised_follows_the_numbers_not_an_assumed_direction():
    text = measured_against_realised(BY_N)
    assert "more than the call's growth predicts at N = 4, 8, 16" in text and "less at N = 32" in text
    flipped = {n: {**r, "measured_speedup": r["realised_speedup"] - 0.1} for n, r in BY_N.items()}
    assert "more than" not in measured_against_realised(flipped)


def test_the_best_n_reason_is_the_sweeps_own():
    text = best_n_sentence(BY_N, 8)
    assert "N = 4, 8, 16 all lie within 0.05" in text and "at N = 32 it measures 0.79x" in text
    assert "grows faster" not in text                              # no trend the per-call column does not show
    steep = {**BY_N, "4": {**BY_N["4"], "measured_speedup": 0.5}, "16": {**BY_N["16"], "measured_speedup": 0.6}}
    assert "every other N is more than 0.05 below it" in best_n_sentence(steep, 8)


def test_the_arithmetic_holds_and_two_harnesses_are_named_apart():
    text = call_cost_sentence(BY_N["32"], 32)
    assert f"2.00 / 2.50 = {2.0 / 2.5:.2f}x predicted, 0.79x measured" in text
    paper = paper_arithmetic()
    assert f"2.13x is its formula, tokens/step / (1 + verify overhead): 2.13 x 1.136 = {2.13 * 1.136:.2f}" in paper
    assert "the ceiling 2.47 (inferred" in paper and "no frame was timed" in paper
    ar_step = {"per_call_ms": 0.9, "layers": 0.6, "heads": 0.1, "sample": 0.12, "commit": 0.08, "prefill_ms": 1.1}
    round_row = {"ratio": 0.5, "layers": 1.3, "heads": 0.1, "query": 0.1, "sample": 0.2, "walk": 0.05, "commit": 0.05}
    est = three_estimates(BY_N["8"], round_row, ar_step, 8, 0.6)      # "query": an older record's name of the drafts
    assert "predicts 0.90x" in est and "2.00 AR steps, predicts 0.90x" in est and "measured 0.93x" in est
    assert "*AR call* (0.600 ms)" in est and "*AR step* (0.900 ms)" in est and "which is why" not in est
    assert "The round costs 2.00 AR steps while its call alone costs 2.00 AR calls" in est
    assert "drafts, samples, walks and commits (0.40 ms: draft 0.100, sample 0.200" in est
    assert "(layers and heads 1.400 ms), takes more than alone in the sweep (1.200 ms)" in est
    cheap = three_estimates(BY_N["8"], {**round_row, "layers": 1.0}, ar_step, 8, 0.6)
    assert "(layers and heads 1.100 ms), takes no more than alone" in cheap


def test_the_miniatures_frames_compare_measured_lossless_loops_and_show_a_differing_one_apart():
    from helpers.report.deployments import exact_frames, frames_rows, frames_sentence
    frames = {"frames": 100, "official": "official@float32",
              "systems": {"ar@bfloat16": {"frame_ms": 5.0, "tokens_per_step": 1.0},
                          "ar@w8a16": {"frame_ms": 10.0, "tokens_per_step": 1.0},
                          "spec8@bfloat16": {"frame_ms": 4.0, "tokens_per_step": 1.7},
                          "spec8@w8a16": {"frame_ms": 12.5, "tokens_per_step": 1.7},
                          "official@float32": {"frame_ms": 30.0, "tokens_per_step": None}},
              "identical": {"w8a16": {"spec": {"8": 100}}, "bfloat16": {"spec": {"8": 99}}}}
    e = exact_frames(frames)
    assert e["fastest_ar"] == "ar@bfloat16" and e["fastest_spec"] == "spec8@w8a16"     # 99 of 100: apart
    assert e["spec_over_ar"] == pytest.approx(0.4) and e["inexact_spec"] == ("spec8@bfloat16", pytest.approx(1.25))
    text = frames_sentence(frames)
    assert "0.40x the fastest lossless AR loop" in text
    assert "differing from its own AR frame: spec8@bfloat16 at 1.25x the fastest lossless AR loop (ar@bfloat16)" in text
    assert "bfloat16 N = 8: 99 of 100" in text
    assert {r["system"]: r["identical to its AR"] for r in frames_rows(frames)} == {
        "spec8@bfloat16": "99/100", "ar@bfloat16": "-", "ar@w8a16": "-", "spec8@w8a16": "100/100",
        "official@float32": "-"}


def test_the_checks_derived_values_are_the_figures_derived_values():
    from helpers.report.paper import PAPER, derived_paper_values, paper_figure4
    paper = paper_figure4(PAPER["figure4_latency"])
    derived = {f"{o:+.3f}" for d in paper["devices"].values() for o in d["derived"].values()}
    assert {k for k, context in derived_paper_values().items() if context is None} == derived


def test_best_projected_takes_the_largest_speedup_and_counts_none_as_zero():
    from helpers.report.projection import best_projected
    proj = {"bf16": {"best_speedup": 0.8}, "w8a16": {"best_speedup": 1.1}, "fp32": {"best_speedup": None}}
    assert best_projected(proj) == "w8a16"
    assert best_projected({"fp32": {"best_speedup": None}, "bf16": {"best_speedup": 0.2}}) == "bf16"


def test_the_speedup_arithmetic_is_written_once():
    """Figure 4's formula and the frame projection, by hand: the paper's M3 Pro and a round of 1.55 AR calls."""
    from helpers.measure.speedup import formula, frame_speedup

    assert formula(2.47, 1.136) == pytest.approx(2.47 / 1.136)
    assert frame_speedup(2.47, 1.55) == pytest.approx(15 / (1 + (15 / 2.47 - 1) * 1.55))
    assert frame_speedup(1.0, 1.0) == pytest.approx(1.0) and frame_speedup(15.0, 3.0) == pytest.approx(15.0)
