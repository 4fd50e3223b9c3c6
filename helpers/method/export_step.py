"""The call a device exports when its walk runs on its host (the Core ML export): the verify call plus drafts from
every node.

`DraftingStep(core, tree, drafter)` is `FusedStep` (`helpers.method.stack`) whose last output is, instead of the
states, drafts [1, q, D, m] (long): the top-m candidates at depths 1..D from every token (B = 1), each drafted by
`helpers.method.drafters.top_candidates` as a round drafts from its stop node, so the host can pick the next query
whichever node the walk stops at.
"""

from __future__ import annotations

import torch

from helpers.method.drafters import Drafter, top_candidates
from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree


class DraftingStep(FusedStep):
    """`FusedStep` for `tree` with drafts from every node by `drafter`; width: candidates per depth (default
    max(tree.width)). forward(tokens [1, q], k, v, t [1]) -> (logits, k_new, v_new, drafts [1, q, D, m])."""

    def __init__(self, core: FusedCore, tree: SparseTree, drafter: Drafter, width: int | None = None):
        super().__init__(core, tree, prenorm=drafter.prenorm)
        if self.depth < 1:
            raise ValueError("a drafting call needs a tree of depth 1 or more")
        if self.depth > drafter.depth:
            raise ValueError(f"tree depth {self.depth} exceeds the drafter's K={drafter.depth}")
        self.drafter, self.width = drafter, width or max(tree.width)
        n, device = core.num_codes, core.heads.device
        # code position s = t + d + 1 of each depth group's states (drafts from there), within the frame (<= 15)
        self.register_buffer("draft_pos", (torch.arange(n, device=device)[:, None] + 1
                                           + torch.arange(self.depth + 1, device=device)).clamp(max=n),
                             persistent=False)                                        # [15, D + 1]

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("logits", "k_new", "v_new", "drafts")

    def forward(self, tokens, k_cache, v_cache, t):
        logits, k_new, v_new, state = super().forward(tokens, k_cache, v_cache, t)
        if not torch.jit.is_tracing() and state.shape[0] != 1:             # traced: the export's shapes are fixed
            raise ValueError(f"a call with drafts decodes one stream (batch 1), got batch {state.shape[0]}")
        draft_pos = self.draft_pos.index_select(0, t.reshape(1))[0]                          # [D + 1]
        drafts = torch.cat([top_candidates(self.drafter, state[0, s:e], draft_pos[d:d + 1], self.depth, self.width,
                                           self.core.heads) for d, s, e in self.groups])      # [q, D, m]
        return logits, k_new, v_new, drafts[None]
