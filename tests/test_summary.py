"""The report's opening section is built from the run's metrics and says only what they show."""

import json
import math
from pathlib import Path

import pytest

from helpers.report.legacy_metrics import legacy_keys_renamed
from helpers.report.nb08_report import write_report
from helpers.report.nb08_summary import MIN_GAP, summary_lines
from helpers.method.diagnostics import share_closed

REFERENCE = Path(__file__).resolve().parents[1] / "outputs" / "mini-reference" / "metrics.json"


def _metrics(reused=1.7, medusa=2.6, offsets=2.47, identical=100, compared=100):
    return {"run": {"params": {"backend": "mini", "tree_size": 32, "top_k": 50}, "device": "cpu: test"},
            "drafters": {"reused": {"tokens_per_step": reused}, "medusa": {"tokens_per_step": medusa},
                         "offsets": {"tokens_per_step": offsets}},
            "lossless": {"frames_identical": identical, "frames_compared": compared},
            "target": {"top_prob": [0.5, 0.7], "entropy": [1.0, 0.5]},
            "ceiling": {"top1": [0.6, 0.5, 0.4], "covered": [1.0, 0.99, 0.9]}}


def test_gap_share_and_its_undefined_case():
    assert share_closed(1.7, 2.47, 2.6, MIN_GAP) == pytest.approx(0.77 / 0.9)
    assert math.isnan(share_closed(1.8, 1.9, 1.8 + MIN_GAP / 2, MIN_GAP))


def test_sentences_carry_the_runs_numbers():
    text = "\n".join(summary_lines(_metrics(reused=1.5, medusa=2.0, offsets=1.75)))
    assert "offsets 1.75" in text and "offsets: 50% of the tokens/step gap" in text
    assert "Tokens/step at N = 32: offsets 1.75 against the reused heads' 1.50 (+0.25)" in text      # the lead
    assert "0.60 of its probability" in text and "0.60, 0.50, 0.40" in text
    assert "100 of 100 frames identical" in text and "NOT" not in text


def test_a_failed_check_and_a_missing_gap_are_said():
    text = "\n".join(summary_lines(_metrics(reused=1.8, medusa=1.81, identical=99)))
    assert "99 of 100 frames identical" in text and "NOT all" in text
    assert "of the tokens/step gap" not in text


def test_quality_and_parity_sentences():
    m = _metrics()
    m["languages"] = {"en": {"per_ar": 0.20, "per_spec": 0.22, "per_ar_std": 0.03, "per_spec_std": 0.01},
                      "de": {"per_ar": 0.30, "per_spec": 0.29, "per_ar_std": 0.02, "per_spec_std": 0.02},
                      "ja": {"per_ar": None}}
    m["parity"] = {"rejected": False, "p_min_adjusted": 0.7, "control_temperature": 1.2,
                   "control": {"rejected": True, "p_min_adjusted": 1e-6}}
    text = "\n".join(summary_lines(m))
    assert "2 languages" in text and "AR 25.0%, speculative 25.5%" in text and "gap 2.0%" in text and "3.0%" in text
    assert "not rejected (adjusted p 0.7)" in text and "so the test has power" in text
    m["parity"]["control"]["rejected"] = False
    assert "lacks power" in "\n".join(summary_lines(m))


def test_the_lead_says_speed_below_one_and_names_the_machine():
    m = _metrics()
    m["run"]["machine"] = {"cpu_model": "Some CPU", "cpu_flags": ["avx2"], "cores": 2, "threads": 1}
    m["latency"] = {"cpu": {"best_n": 4, "4": {"measured_speedup": 1.1, "tokens_per_step": 1.5, "overhead": 0.3},
                            "32": {"measured_speedup": 0.9, "tokens_per_step": 2.0, "overhead": 1.4}}}
    text = "\n".join(summary_lines(m))
    assert "At the paper's N = 32 the measured speedup on cpu is 0.90x (below 1: slower than AR)" in text
    assert "Measured on Some CPU (2 cores; AVX2; no AMX), 1 thread" in text


def test_nothing_measured_nothing_said():
    assert summary_lines({"run": {"params": {}}}) == []


def test_reference_run_report_opens_with_the_summary(tmp_path):
    (tmp_path / "metrics.json").write_text(REFERENCE.read_text())
    text = write_report(tmp_path)
    m = legacy_keys_renamed(json.loads(REFERENCE.read_text()))
    assert "## What this run shows, what the paper shows, and why they differ" in text
    assert text.index("What this run shows") < text.index("## Table 1")
    assert f"{m['lossless']['frames_identical']:,} of {m['lossless']['frames_compared']:,}" in text


def test_mismatch_sentence_from_the_diagnostics():
    m = _metrics()
    m["diagnostics"] = {"drafts": {k: {"acceptance_by_depth": [a, a / 2, a / 3]}
                                   for k, a in (("offsets", 0.45), ("own", 0.5), ("ideal", 0.9), ("reused", 0.3))},
                        "translation": {"normed": {"shared_share": [0.02, 0.03, 0.04]},
                                        "prenorm": {"shared_share": [0.9, 0.8, 0.7]}},
                        "tiny_drift": {"loss_gap_closed": {"offsets": 0.43, "offsets_prenorm": 0.97}}}
    text = "\n".join(summary_lines(m))
    assert "own 0.500, reused 0.300, offsets 0.450" in text and "lose 0.200" in text
    assert "normed: 2.0%, 3.0%, 4.0%; prenorm: 90.0%, 80.0%, 70.0%" in text
    assert "offsets 43%, offsets_prenorm 97%" in text


def test_the_closing_table_says_why_and_refuses_a_share_of_no_gap():
    from helpers.report.nb08_comparison import comparison_rows
    m = _metrics(reused=1.5, medusa=2.0, offsets=1.75)
    m["diagnostics"] = {"drafts": {"own": {"acceptance_by_depth": [0.5]}, "reused": {"acceptance_by_depth": [0.3]}},
                        "translation": {"normed": {"shared_share": [0.01, 0.02]}}}
    rows = {r["result"]: r for r in comparison_rows(m)}
    assert rows["offsets' share of the reused-to-Medusa gap (tokens/step)"]["this run"] == "50%"
    assert "at most 2.0%" in rows["offsets' share of the reused-to-Medusa gap (tokens/step)"]["why they differ"]
    assert "0.60 of its probability" in rows["tokens/step, Medusa heads, N = 32"]["why they differ"]
    assert rows["lossless"]["this run"].startswith("100 / 100")
    small = {r["result"]: r for r in comparison_rows(_metrics(reused=1.8, medusa=1.82, offsets=1.81))}
    assert small["offsets' share of the reused-to-Medusa gap (tokens/step)"]["this run"].startswith("no share")
    assert comparison_rows({"run": {}}) == []


def test_older_metrics_are_read_with_todays_keys():
    old = {"profile": {"trees": {"4": {"over_ar": {"query": 0.1, "walk": 0.2}}}}, "toks_per_step": [{"toks_per_step": 2}]}
    assert legacy_keys_renamed(old) == {"profile": {"trees": {"4": {"over_ar": {"draft": 0.1, "walk": 0.2}}}},
                                        "tokens_per_step": [{"tokens_per_step": 2}]}
