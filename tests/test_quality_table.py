"""Notebook 05's aggregation of the quality stage (`helpers.report.nb05_quality`): means and stds over seeds, the
table's rows, the metrics section, the across-language gap / spread / codec loss and the phase costs."""

import json
from pathlib import Path

import nbformat
import pytest

from helpers.report.nb05_quality import codec_loss, language_section, mean_std, phase_costs, quality_table
from helpers.report.quality_parity import parity_gap, scored_languages

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "outputs" / "mini-reference" / "metrics.json"


def stage_language(per_ar=(0.2, 0.4), per_spec=(0.3, 0.3), wer_ar=(), wer_spec=(), per_gt=0.1, per_codec=0.15,
                   wer_codec=None):
    """One language of `quality(P)["languages"]`."""
    return {"per_gt": per_gt, "per_codec": per_codec, "per_ar": list(per_ar), "per_spec": list(per_spec),
            "wer_codec": wer_codec, "wer_ar": list(wer_ar), "wer_spec": list(wer_spec), "frames_ar": 120,
            "frames_spec": 118, "parity_p": 0.8, "phonemes": [], "transcripts": []}


def test_mean_std_over_seeds():
    assert mean_std([]) == (None, None)
    assert mean_std([0.25]) == (0.25, None)                       # one seed: no std
    mean, std = mean_std([0.2, 0.4])
    assert mean == pytest.approx(0.3) and std == pytest.approx(0.1)  # population std
    assert all(type(x) is float for x in mean_std([1, 2, 4]))


def test_language_section_and_row():
    r = stage_language(wer_ar=[0.5], wer_spec=[0.7], wer_codec=0.6)
    s = language_section(r)
    assert s["per_ar"] == pytest.approx(0.3) and s["per_ar_std"] == pytest.approx(0.1)
    assert s["per_spec"] == pytest.approx(0.3) and s["per_spec_std"] == pytest.approx(0.0)
    assert (s["wer_ar"], s["wer_ar_std"], s["wer_spec"], s["wer_spec_std"]) == (0.5, None, 0.7, None)
    assert s["per_ar_per_seed"] == [0.2, 0.4] and s["wer_spec_per_seed"] == [0.7]
    assert {k: s[k] for k in ("per_gt", "per_codec", "wer_codec", "parity_p", "frames_ar", "frames_spec")} == \
        {"per_gt": 0.1, "per_codec": 0.15, "wer_codec": 0.6, "parity_p": 0.8, "frames_ar": 120, "frames_spec": 118}
    assert "phonemes" not in s and "transcripts" not in s
    rows, section = quality_table({"en": r, "de": stage_language(per_ar=(), per_spec=(), per_gt=None, per_codec=None)},
                                  ["de", "en"], seeds=2)
    assert list(section) == ["de", "en"] and [row["language"] for row in rows] == ["de", "en"]
    de, en = rows
    assert list(en) == ["language", "seeds", "PER truth", "PER codec", "PER AR", "AR std", "PER spec", "spec std",
                        "WER codec", "WER AR", "WER spec", "WER seeds", "frames AR / spec", "parity p"]
    assert en["seeds"] == 2 and en["WER seeds"] == 1 and en["frames AR / spec"] == "120 / 118"
    assert en["PER AR"] == s["per_ar"] and en["spec std"] == s["per_spec_std"] and en["WER spec"] == 0.7
    assert de["PER AR"] is None and de["AR std"] is None and de["WER seeds"] == 0
    json.dumps(section)                                            # metrics.json-ready


def test_gap_spread_and_codec_loss():
    section = {"en": language_section(stage_language()),
               "de": language_section(stage_language(per_ar=[0.5], per_spec=[0.45], per_gt=None, per_codec=0.2)),
               "ja": language_section(stage_language(per_ar=(), per_spec=()))}
    assert scored_languages(section) == ["en", "de"] and scored_languages(section, ["de", "ja"]) == ["de"]
    pg = parity_gap(section)
    assert pg["scored"] == ["en", "de"] and pg["gap"] == pytest.approx(0.05) and pg["spread"] == pytest.approx(0.1)
    assert parity_gap(section, ["de"])["spread"] is None           # one seed: no spread
    assert parity_gap(section, ["ja"]) is None and parity_gap({}) is None
    assert codec_loss(section, ["en", "de"]) == pytest.approx(((0.15 - 0.1) + 0.2) / 2)   # per_gt None counts as 0


def test_phase_costs_only_where_timed():
    seconds = {"wall": {"ar": 10.0, "spec": 20.0, "decode": 4.0, "control": 1.0},
               "cpu": {"ar": 30.0, "spec": 40.0, "decode": 8.0, "control": 2.0}}
    frames = {"synthesized": {"ar": 1000, "spec": 0}, "control": 500, "decoded": 2000}
    assert phase_costs(seconds, frames) == {"ar": "10 s wall, 30 s CPU, 30 ms CPU per frame",
                                            "spec": "20 s wall, 40 s CPU, 40000 ms CPU per frame",   # max(frames, 1)
                                            "control": "1 s wall, 2 s CPU, 4 ms CPU per frame",
                                            "decode": "4 s wall, 8 s CPU, 4 ms CPU per frame"}
    del seconds["cpu"]["control"]
    assert "control" not in phase_costs(seconds, frames)


def test_reproduces_the_reference_runs_languages_section():
    """The reference run's metrics were written by notebook 05's code before it moved here: from its per-seed
    lists the section comes out the same, key by key."""
    m = json.loads(REFERENCE.read_text())
    langs = m["run"]["params"]["languages"]
    stage = {lang: {**{k: v[k] for k in ("per_gt", "per_codec", "wer_codec", "frames_ar", "frames_spec", "parity_p")},
                    **{k: v[f"{k}_per_seed"] for k in ("per_ar", "per_spec", "wer_ar", "wer_spec")}}
             for lang, v in m["languages"].items()}
    _, section = quality_table(stage, langs, m["run"]["params"]["wer_seeds"])
    for lang in langs:
        for key, value in section[lang].items():
            assert value == m["languages"][lang][key], (lang, key)


def test_notebook_05_calls_it():
    source = "\n".join(c.source for c in nbformat.read(ROOT / "notebooks" / "05_wer_parity.ipynb", as_version=4).cells)
    assert "quality_table(" in source and "parity_gap(" in source and "def mean_std" not in source
