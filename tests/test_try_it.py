"""The "try it yourself" cells (notebooks 00 and 03): what a reader types is read or refused with a reason, and
what is shown for it is the decoder's own result."""

import pytest
import torch

from helpers.experiment.run.quiet import PROGRESS_ENV, under_runner
from helpers.report.nb00_overview import parse_tree, toy_round_rows
from helpers.report.nb03_tree import tree_summary


def test_a_typed_tree_is_read_or_refused_with_what_is_allowed():
    assert parse_tree("0; 1; 0,0") == ((0,), (1,), (0, 0))
    for bad in ("0; 1,0", "0; x", "", "0; -1"):
        with pytest.raises(ValueError, match="tree|parent"):
            parse_tree(bad)


def test_the_toy_round_for_other_settings_keeps_ars_codes():
    for tree, depth, temperature in (("0; 1; 0,0", 2, 0.9), ("0; 0,0; 0,0,0", 3, 0.3), ("0; 1; 2", 1, 1.5)):
        text = toy_round_rows(tree, depth, temperature, seed=1)
        assert " equal AR's " in text and "DIFFER" not in text and "| round |" in text
    with pytest.raises(ValueError, match="deeper than K = 1"):
        toy_round_rows("0; 0,0", 1)


def test_the_tree_summary_counts_the_greedy_trees_nodes():
    a = torch.tensor([[0.4, 0.2, 0.1, 0.05], [0.3, 0.1, 0.05, 0.02], [0.2, 0.1, 0.02, 0.01]], dtype=torch.float64)
    text, tree = tree_summary(a, 8)
    assert sum(tree.nodes_per_depth) == 8 == tree.size
    assert "nodes per depth " + " / ".join(map(str, tree.nodes_per_depth)) in text
    _, capped = tree_summary(a, 4, max_depth=1)
    assert capped.max_depth == 1 and capped.nodes_per_depth == [4]           # the table's four ranks at depth 1
    with pytest.raises(ValueError, match=r"N = 8 nodes do not fit in a tree at most 1 deep over 4 ranks per depth "
                                         r"\(it holds 4\): lower N or raise max_depth"):
        tree_summary(a, 8, max_depth=1)


def test_controls_only_where_a_person_runs_the_notebook(monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "log")
    assert under_runner()
    monkeypatch.delenv(PROGRESS_ENV)
    assert not under_runner()
