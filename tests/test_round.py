"""The round's walk (`helpers.method.tree.accept`) against the walk's definition, one query at a time on the host:
from the root, descend into the child whose token equals the current node's sample; stop where none does."""

import pytest
import torch

from drafting import TREES
from helpers.method.stack import commit_kv
from helpers.method.round import accept, pack_query
from helpers.method.tree import TreeIndex


def walk_by_definition(tree, tokens: list[int], ys: list[int]) -> int:
    node = 0
    while True:
        nxt = [c for c in tree.children[node].values() if tokens[c] == ys[node]]
        if not nxt:
            return node
        node = nxt[0]


@pytest.mark.parametrize("tree_name", list(TREES))
def test_accept_is_the_walk(tree_name):
    """Every frame of a batch at once; siblings carry distinct tokens (as top-m drafts do) and each node's sample is
    one of its children's tokens 70% of the time, so walks stop at every depth; the path is the stop node's
    ancestors."""
    tree = TREES[tree_name]
    index = TreeIndex(tree, torch.device("cpu"))
    gen = torch.Generator().manual_seed(len(tree.paths))
    vocab, frames, q = max(tree.width) + 2, 300, tree.size + 1
    tokens, ys = [], []
    for _ in range(frames):
        row = [0] * q
        for kids in tree.children:                                        # distinct tokens under each parent
            perm = torch.randperm(vocab, generator=gen).tolist()
            for rank, child in kids.items():
                row[child] = perm[rank]
        draws = []
        for node, kids in enumerate(tree.children):
            hit = kids and float(torch.rand((), generator=gen)) < 0.7
            pick = list(kids.values())[int(torch.randint(0, len(kids), (), generator=gen))] if hit else None
            draws.append(row[pick] if hit else vocab)                     # vocab: a token no child carries
        tokens.append(row)
        ys.append(draws)
    tokens, ys = torch.tensor(tokens), torch.tensor(ys)
    stop = accept(tokens, ys, index)
    expected = [walk_by_definition(tree, t, y) for t, y in zip(tokens.tolist(), ys.tolist())]
    assert stop.tolist() == expected
    assert len(set(expected)) > 1 or tree.size == 1, "every walk stopped at one node: the test exercises nothing"
    for s in set(expected):
        depth = int(tree.depth[s])
        assert index.paths[s, :depth + 1].tolist() == tree.ancestor_paths[s]


def test_commit_kv_writes_only_its_slots():
    k, v = torch.zeros(2, 1, 1, 6, 3), torch.zeros(2, 1, 1, 6, 3)
    k_new, v_new = torch.ones(2, 1, 1, 2, 3), 2 * torch.ones(2, 1, 1, 2, 3)
    commit_kv(k, v, torch.tensor([2, 3]), k_new, v_new)
    assert k[:, :, :, 2:4].eq(1).all() and v[:, :, :, 2:4].eq(2).all()
    assert k[:, :, :, [0, 1, 4, 5]].eq(0).all() and v[:, :, :, [0, 1, 4, 5]].eq(0).all()
