"""Sparse trees, greedy calibration against brute force, expected tokens/step, bad input."""

import itertools

import pytest
import torch

from drafting import TREES
from helpers.method.calibration import expected_tokens_per_step, greedy_tree, path_probability
from helpers.method.decoding import Decoder
from helpers.method.drafters import PositionOffsets, ReusedHeads
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree


def test_tree_buffers():
    tree = SparseTree([(1,), (0,), (0, 0), (0, 1), (0, 0, 0)])
    assert tree.paths == [(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]
    assert tree.depth.tolist() == [0, 1, 1, 2, 2, 3]
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 3]
    assert tree.width == [2, 2, 1]
    expected = torch.tensor([[1, 0, 0, 0, 0, 0],
                             [1, 1, 0, 0, 0, 0],
                             [1, 0, 1, 0, 0, 0],
                             [1, 1, 0, 1, 0, 0],
                             [1, 1, 0, 0, 1, 0],
                             [1, 1, 0, 1, 0, 1]], dtype=torch.bool)
    assert torch.equal(tree.mask, expected)
    assert tree.children[1] == {0: 3, 1: 4}
    assert tree.pruned(1).paths == [(0,), (1,)] and tree.pruned(0) is None and tree.pruned(3) is tree


@pytest.mark.parametrize("paths,message", [
    ([], "at least one node"),
    ([(0, 1)], r"needs its parent \(0,\)"),
    ([(0,), (0,)], "appears twice"),
    ([(-1,)], "ranks must be >= 0"),
])
def test_bad_trees_are_refused(paths, message):
    with pytest.raises(ValueError, match=message):
        SparseTree(paths)


def test_tree_deeper_than_drafter_is_refused(tiny):
    _, _, cp = tiny
    with pytest.raises(ValueError, match=r"tree depth 3 exceeds the drafter's K=2; allowed tree depth: 1..2"):
        Decoder(cp, SamplerConfig(), ReusedHeads(cp, depth=2), SparseTree.chain(3))


def test_offsets_of_wrong_hidden_size_are_refused(tiny):
    _, _, cp = tiny
    with pytest.raises(ValueError, match=rf"expected \[K=3, hidden={cp.hidden_size}\]"):
        PositionOffsets(cp, offsets=torch.zeros(3, cp.hidden_size + 1, dtype=cp.dtype))


def expected_accepted(tree, a):
    """Expected drafts accepted in one round: the sum over the tree's nodes of their path products."""
    return sum(path_probability(p, a) for p in tree.paths)


def _brute_force_best(a, size, depth):
    nodes = [p for d in range(1, depth + 1) for p in itertools.product(range(a.shape[1]), repeat=d)]
    best = 0.0
    for subset in itertools.combinations(nodes, size):
        s = set(subset)
        if all(len(p) == 1 or p[:-1] in s for p in subset):
            best = max(best, expected_accepted(SparseTree(subset), a))
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [1, 3, 5])
def test_greedy_calibration_is_optimal(seed, size):
    a = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    tree = greedy_tree(a, size)
    assert tree.size == size
    assert expected_accepted(tree, a) == pytest.approx(_brute_force_best(a, size, 3), abs=1e-12)


def test_expected_tokens_per_step_limits():
    perfect = torch.tensor([[1.0, 0.0]] * 3)
    assert expected_tokens_per_step(SparseTree.chain(3), perfect) == pytest.approx(3.0)
    assert expected_tokens_per_step(SparseTree.chain(3), torch.zeros(3, 2)) == pytest.approx(1.0)
    # chain K=1 with acceptance a: each round is a Bernoulli advance of 1 or 2
    half = torch.tensor([[0.5, 0.0]])
    value = expected_tokens_per_step(SparseTree.chain(1), half)
    assert 1.0 < value < 1.5


def test_calibration_input_errors():
    with pytest.raises(ValueError, match="must lie in"):
        greedy_tree(torch.tensor([[1.5]]), 1)
    with pytest.raises(ValueError, match="N=10 exceeds"):
        greedy_tree(torch.rand(2, 2), 10)
    with pytest.raises(ValueError, match="tree size N must be >= 1"):
        greedy_tree(torch.rand(2, 2), 0)


def test_named_trees_have_requested_sizes():
    assert {n: t.size for n, t in TREES.items()} == {"chain": 3, "full2": 14, "sparse1": 1, "sparse4": 4,
                                                     "sparse16": 16, "sparse32": 32}
