"""What the host needs for a round at each root position t (computed once per decoder), and the walk.

`make_plans(core, tree, drafter)` -> {t: FusedPlan} for t = 1..14: the tree pruned at depth 14 - t, its fused call,
and the round's index tables. `FusedPlan.walk` is the host's walk of the verification (the compiled round runs the
same walk on the device: `helpers.method.compiled`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.method.drafters import Drafter
from helpers.method.fused.core import FusedCore
from helpers.method.fused.step import FusedStep
from helpers.method.tree import SparseTree


@dataclass
class FusedPlan:
    """What the host needs for a round whose root is at code position t (computed once per decoder)."""

    t: int
    step: FusedStep
    tree: SparseTree | None
    t_tensor: torch.Tensor        # [1] long
    u_index: torch.Tensor         # [q] column of u used by each token's sample
    node_depth: torch.Tensor      # [N] depth - 1 of each node (row of the drafts)
    node_rank: torch.Tensor       # [N] rank of each node (column of the drafts)
    children: list[list[int]]     # query index -> children query indices
    paths: list[torch.Tensor]     # query index -> [root, ..., node] query indices (the KV entries to keep)
    prefix: list[bool]            # query index -> its path is 0, 1, .., len - 1 (committed as a slice)
    out_pos: list[int]            # code position each token's output produces
    draft_depth: int              # drafts this round's tree needs (rows of the candidates)
    draft_width: int              # candidates per depth (columns)

    def walk(self, ys: list[int], tokens: list[int]) -> tuple[int, torch.Tensor, list[int]]:
        """Descend from the root while a token's sample ys[i] is one of its children's tokens.

        ys, tokens: per query index -> (stop node, its path [root..node] as an index tensor, the committed
        codes: the accepted tokens then the stop node's sample)."""
        node, taken, children = 0, [], self.children
        while True:
            y = ys[node]
            taken.append(y)
            for c in children[node]:
                if tokens[c] == y:
                    node = c
                    break
            else:
                return node, self.paths[node], taken


def make_plans(core: FusedCore, tree: SparseTree, drafter: Drafter | None,
               prenorm: bool | None = None) -> dict[int, FusedPlan]:
    """One plan per root position t = 1..14: the tree pruned at depth 14 - t and its fused call (prenorm: see
    `FusedStep`)."""
    n = core.num_codes
    device = core.heads.device
    steps: dict[SparseTree | None, FusedStep] = {}
    plans = {}
    for t in range(1, n):
        sub = tree.pruned(n - 1 - t)
        if sub not in steps:
            steps[sub] = FusedStep(core, sub, drafter, prenorm=prenorm)
        depth = sub.depth_list if sub is not None else [0]
        paths = [torch.tensor(p, device=device) for p in (sub.ancestor_paths if sub is not None else [[0]])]
        plans[t] = FusedPlan(
            t=t, step=steps[sub], tree=sub, t_tensor=steps[sub].t_inputs[t],
            u_index=torch.tensor([t + d for d in depth], device=device),
            node_depth=torch.tensor([d - 1 for d in depth[1:]], device=device, dtype=torch.long),
            node_rank=(sub.rank[1:] if sub is not None else torch.zeros(0, dtype=torch.long)).to(device),
            children=[sorted(c.values()) for c in sub.children] if sub is not None else [[]],
            paths=paths, prefix=[p.tolist() == list(range(len(p))) for p in paths], out_pos=[t + d + 1 for d in depth],
            draft_depth=sub.max_depth if sub is not None else 0,
            draft_width=max(sub.width) if sub is not None else 0)
    return plans
