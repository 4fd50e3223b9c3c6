"""Sparse draft trees, Medusa style: a tree is a set of rank paths.

Node `(r_1, ..., r_d)` carries the rank-`r_d` draft candidate for depth `d`, under its parent
`(r_1, ..., r_{d-1})`. A tree of N nodes is packed after the root into a query of N + 1 tokens.
Everything a decoding round needs is computed once here (like Medusa's tree buffers): `SparseTree` on the host,
`TreeIndex` its query-indexed tables on the device. The round packs its query and walks the tree over these tables
(`helpers.method.round.pack_query`, `accept`).
"""

from __future__ import annotations

from functools import cached_property
from itertools import product
from typing import Iterable, Sequence

import torch
from torch import nn

Path = tuple[int, ...]


class SparseTree:
    """A draft tree. Query index 0 is the root; node i (0-based, sorted by depth then path) is index i + 1.

    Buffers (query-indexed, length q = N + 1, root first):
        depth [q] (root 0), rank [q] (root 0), parent [q] (root -1), mask [q, q] bool (ancestors and self);
        ancestor_paths (query index -> root .. itself) and children (query index -> {rank: child}).
    """

    def __init__(self, paths: Iterable[Sequence[int]]):
        paths = [tuple(int(r) for r in p) for p in paths]
        if not paths:
            raise ValueError("a tree needs at least one node; got no paths (example: [(0,), (0, 0), (1,)])")
        seen = set()
        for p in paths:
            if not p:
                raise ValueError("an empty path is the root, which is implicit; give paths of length >= 1")
            if min(p) < 0:
                raise ValueError(f"ranks must be >= 0, got path {p}")
            if p in seen:
                raise ValueError(f"path {p} appears twice")
            seen.add(p)
        for p in paths:
            if len(p) > 1 and p[:-1] not in seen:
                raise ValueError(f"path {p} needs its parent {p[:-1]} in the tree")
        self.paths: list[Path] = sorted(paths, key=lambda p: (len(p), p))
        index = {p: i + 1 for i, p in enumerate(self.paths)}
        q = len(self.paths) + 1
        self.depth = torch.tensor([0] + [len(p) for p in self.paths])
        self.rank = torch.tensor([0] + [p[-1] for p in self.paths])
        self.parent = torch.tensor([-1] + [index.get(p[:-1], 0) for p in self.paths])
        mask = torch.eye(q, dtype=torch.bool)
        mask[:, 0] = True
        for p, i in index.items():
            for d in range(1, len(p)):
                mask[i, index[p[:d]]] = True
        self.mask = mask
        self.children: list[dict[int, int]] = [dict() for _ in range(q)]   # query index -> {rank: child}
        for p, i in index.items():
            self.children[index.get(p[:-1], 0)][p[-1]] = i
        self._pruned: dict[int, SparseTree] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def chain(cls, depth: int) -> "SparseTree":
        """Top-1 draft at each depth: (0,), (0, 0), ..."""
        return cls([(0,) * d for d in range(1, depth + 1)])

    @classmethod
    def full(cls, width: int, depth: int) -> "SparseTree":
        """Every path of ranks < width up to `depth` (width + width^2 + ... nodes)."""
        return cls([p for d in range(1, depth + 1) for p in product(range(width), repeat=d)])

    # ------------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        """Number of nodes N (the query holds N + 1 tokens)."""
        return len(self.paths)

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @cached_property
    def width(self) -> list[int]:
        """Candidates needed per depth: width[d - 1] = 1 + the largest rank used at depth d."""
        return [1 + max(p[-1] for p in self.paths if len(p) == d) for d in range(1, self.max_depth + 1)]

    @cached_property
    def nodes_per_depth(self) -> list[int]:
        """How many nodes sit at each depth: nodes_per_depth[d - 1] (what a drawing of the tree shows)."""
        return [sum(1 for p in self.paths if len(p) == d) for d in range(1, self.max_depth + 1)]

    @cached_property
    def depth_list(self) -> list[int]:
        return self.depth.tolist()

    @cached_property
    def ancestor_paths(self) -> list[list[int]]:
        """Query index i -> the query indices from the root to i ([0] for the root): the KV entries a walk that
        stops at i keeps, and the codes it commits."""
        parent = self.parent.tolist()
        paths = [[0]]
        for i in range(1, len(parent)):
            paths.append(paths[parent[i]] + [i])          # nodes are sorted by depth: parents come first
        return paths

    def pruned(self, max_depth: int) -> "SparseTree | None":
        """The subtree of nodes at depth <= max_depth (None if that leaves no node). Cached."""
        if max_depth >= self.max_depth:
            return self
        if max_depth < 1:
            return None
        if max_depth not in self._pruned:
            self._pruned[max_depth] = SparseTree([p for p in self.paths if len(p) <= max_depth])
        return self._pruned[max_depth]

    def __repr__(self) -> str:
        return (f"SparseTree(N={self.size}, depth={self.max_depth}, nodes per depth={self.nodes_per_depth}, "
                f"ranks per depth={self.width})")

    def __eq__(self, other) -> bool:
        return isinstance(other, SparseTree) and self.paths == other.paths

    def __hash__(self) -> int:
        return hash(tuple(self.paths))


class TreeIndex(nn.Module):
    """A tree's query-indexed tables for the device (buffers; q = N + 1, root first, D = depth, m = width):
    depth [q], parent [q] (the root: itself), ancestors [q, q] (self included), paths [q, D + 1] (root .. node,
    padded with the node), steps [D + 1] = 0..D, node_depth / node_rank [N] (row and column of each node's draft),
    is_root [q]."""

    def __init__(self, tree: SparseTree, device: torch.device):
        super().__init__()
        self.tree, self.q, self.depth_max, self.width = tree, tree.size + 1, tree.max_depth, max(tree.width)
        D = tree.max_depth
        parent = tree.parent.clone()
        parent[0] = 0
        paths = [p + [p[-1]] * (D + 1 - len(p)) for p in tree.ancestor_paths]
        for name, value in (("depth", tree.depth), ("parent", parent), ("ancestors", tree.mask),
                            ("paths", torch.tensor(paths, device=device)), ("steps", torch.arange(D + 1, device=device)),
                            ("node_depth", tree.depth[1:] - 1), ("node_rank", tree.rank[1:]),
                            ("is_root", tree.depth == 0)):
            self.register_buffer(name, value.to(device), persistent=False)      # the tree's tables live on the host

