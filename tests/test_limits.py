"""Notebook 03's rule for what limits tokens/step (`helpers.report.nb03_tree`): the target's spread or the mismatch."""

import json
from pathlib import Path

import nbformat
import pytest

from helpers.report.nb03_tree import best_trained, limiting_quantity

ROOT = Path(__file__).resolve().parents[1]


def test_the_spread_limits_when_the_mismatch_is_small():
    acc = {"own": [0.4, 0.3], "reused": [0.30, 0.25], "offsets": [0.38, 0.29], "ideal": [0.9, 0.9]}
    lq = limiting_quantity(acc)
    assert lq["best"] == "offsets"                       # largest sum; the ideal drafter is no trained one
    assert lq["mismatch"] == pytest.approx([0.02, 0.01])
    assert lq["limit"] == "spread"                       # 0.02 < 0.5 * (1 - 0.4)
    assert lq["why"] == "the targets' own spread (the no-mismatch own head accepts only 0.30-0.40)"


def test_the_mismatch_limits_when_it_reaches_half_the_spread():
    acc = {"own": [0.9, 0.8], "reused": [0.6, 0.5], "own_ideal_frames": [1.0, 1.0]}
    lq = limiting_quantity(acc)
    assert lq["best"] == "reused" and lq["limit"] == "mismatch"     # 0.3 >= 0.5 * (1 - 0.9)
    assert lq["why"] == "the positional mismatch (the own head accepts up to 0.30 more than reused)"
    assert limiting_quantity({"own": [0.5], "medusa": [0.25]})["limit"] == "mismatch"    # 0.25: not below 0.5 * 0.5
    assert limiting_quantity({"own": [0.5], "medusa": [0.375]})["limit"] == "spread"


def test_ties_and_no_trained_drafter():
    assert best_trained({"own": [1.0], "a": [0.5], "b": [0.5]}) == "a"
    with pytest.raises(ValueError):
        limiting_quantity({"own": [0.5], "ideal": [0.6]})


def test_reproduces_the_reference_run():
    m = json.loads((ROOT / "outputs" / "mini-reference" / "metrics.json").read_text())
    acc = {k: v["acceptance_by_depth"] for k, v in m["diagnostics"]["drafts"].items()}
    lq = limiting_quantity(acc)
    own = acc["own"]
    assert lq["limit"] == "spread" and lq["why"].endswith(f"accepts only {min(own):.2f}-{max(own):.2f})")


def test_notebook_03_calls_it():
    source = "\n".join(c.source for c in nbformat.read(ROOT / "notebooks" / "03_calibrate_tree.ipynb",
                                                       as_version=4).cells)
    assert "limiting_quantity(acc)" in source and "0.5 * (1 - max(own))" not in source
