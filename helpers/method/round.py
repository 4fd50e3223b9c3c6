"""One speculative round, written once: draft, verify, accept, commit.

A round is rooted at code position t: its root token is c_t, the code just sampled. With the frame's KV cache holding
[g, c0, .., c_{t-1}] (t + 1 slots) it runs four phases, every one on the device:

    draft   the stop node's state h_s -> top-m candidates [D, m] for c_{s+1..s+D} (`top_candidates`, over the one
            drafting function), packed behind the root into the next query [1, q] (`TreeIndex.query`)
    verify  one call over the packed tree (`FusedStep`): target logits [1, q, V], the query's keys/values and states
    accept  every query token sampled at once with its own position's uniform (a depth-d token's output is
            c_{t+d+1}, drawn with u[t + d]); a node is accepted when it and every ancestor carry their parent's
            sample; the stop node is the deepest accepted one (`accept`)
    commit  the codes c_{t+1}.. of the root and the accepted path, and their keys/values, written at fixed
            offsets (`commit_kv`, `index_copy_`): entries past the stop node land in slots the next round
            overwrites before any query sees them, so nothing has a data-dependent shape

Each position is sampled exactly once, from its exact conditional, with its own uniform: the codes equal the AR
decoder's for the same uniforms (`decode_frame_ar`), however many drafts a round accepts.

`Round` is the module of one (pruned) tree: the same code runs eagerly (`SpeculativeDecoder`), compiled by
inductor, and captured as a CUDA graph (`helpers.method.compiler`). `Prefill` opens a frame (slots 0-1, c1, round
1's query); `ARStep` is the plain call that ends it (root c_14, no tree). The batched `accept` also replays
recorded frames (`helpers.method.replay`).
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.method.drafters import Drafter, top_candidates
from helpers.method.fused import FusedCore, FusedStep, fusable
from helpers.method.predictor import commit_kv
from helpers.method.sampling import SamplerConfig, sample, target_probs
from helpers.method.tree import SparseTree


ROUND_PHASES = ("verify", "sample", "walk", "commit")       # `Round(until=...)`: the round up to a phase's end


def _mark(clock, phase: str) -> None:
    if clock is not None:
        clock(phase)


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

    def query(self, root: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """Pack the query: roots [B] (c_t), candidates [B, D', m'] (D' >= D, m' >= m) -> queries [B, q] (the one
        packing: rounds, replay, round records, the walkthrough)."""
        return torch.cat((root[:, None], cand[:, self.node_depth, self.node_rank]), dim=1)


def accept(tokens: torch.Tensor, ys: torch.Tensor, index: TreeIndex, valid: torch.Tensor | None = None
           ) -> torch.Tensor:
    """The walk, for B queries at once: tokens, ys [B, q] (each token's sample) -> stop node [B] (query index).

    A node is accepted when its token equals its parent's sample and so is every ancestor's; siblings carry
    distinct tokens, so at most one node per depth is accepted and the deepest is unique. valid [q] (or [B, q]):
    nodes that may be accepted (a full tree's nodes past the frame's end are not)."""
    ok = tokens == ys.index_select(1, index.parent)                        # [B, q]: token == the parent's sample
    if valid is not None:
        ok = ok & valid
    ok = ok | index.is_root                                                 # the root: already committed
    accepted = ~(index.ancestors[None] & ~ok[:, None, :]).any(-1)           # [B, q]: it and every ancestor
    return torch.argmax(accepted.long() * index.depth, dim=-1)             # deepest accepted (root at depth 0)


class Drafts(nn.Module):
    """The draft phase: one state [1, H] at code position s [1] -> top-m candidates [D, m] for c_{s+1..s+D}.
    A fusable drafter drafts on the device from the core's stacked heads; another at a host int s (eager only)."""

    def __init__(self, core: FusedCore, drafter: Drafter, depth: int, width: int):
        super().__init__()
        self.core, self.drafter, self.depth, self.width = core, drafter, depth, width
        self.on_device = fusable(drafter)

    def forward(self, state: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        if self.on_device:
            return top_candidates(self.drafter, state, s, self.depth, self.width, self.core.heads)[0]
        s = int(s)
        depth = min(self.depth, self.core.num_codes - s)
        cand = torch.zeros(self.depth, self.width, dtype=torch.long, device=state.device)   # rows past c15: unread
        if depth > 0:
            cand[:depth] = top_candidates(self.drafter, state, s, depth, self.width)[0]
        return cand


def check_device_drafter(drafter: Drafter) -> None:
    """A clear error for a drafter that drafts only at a host int (a compiled or captured round drafts on the device)."""
    if not fusable(drafter):
        raise ValueError(f"compiled rounds draft with heads (+ offsets): drafter {type(drafter).__name__} drafts on "
                         f"the host; allowed: ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads")


class Prefill(nn.Module):
    """Open a frame: [g, E0(c0)] into slots 0-1, c1 sampled with u[..., 0] into codes[..., 0]; with `drafts`, round
    1's query.

    forward(g [B, Ht], c0 [B], k, v, u [B, 15] or [15], codes [B, 15 + 1] or [15 + 1]) -> c1 [B, 1] (the AR loop's
    first token); with `drafts` (B = 1): (query [1, q], candidates [D, m])."""

    def __init__(self, core: FusedCore, sampler: SamplerConfig, drafts: Drafts | None = None,
                 index: TreeIndex | None = None):
        super().__init__()
        self.core, self.sampler, self.drafts, self.index = core, sampler, drafts, index
        device = core.heads.device
        self.register_buffer("slots", torch.arange(2, device=device), persistent=False)
        self.register_buffer("one", torch.ones(1, dtype=torch.long, device=device), persistent=False)

    def forward(self, g, c0, k, v, u, codes, clock=None):
        prenorm = self.drafts is not None and self.drafts.drafter.prenorm
        logits, k_new, v_new, state = self.core.prefill(g, c0, k, v, prenorm)          # state: h_1, or r_1
        commit_kv(k, v, self.slots, k_new, v_new)
        c1 = sample(target_probs(logits, self.sampler), u[..., 0].reshape(-1))          # [B]
        codes[..., :1] = c1.view(codes.shape[:-1] + (1,))
        if self.drafts is None:
            return c1[:, None]
        cand = self.drafts(state, self.one)
        return self.index.query(c1, cand[None]), cand


class ARStep(nn.Module):
    """The plain call at root position t: c_t in, KV slot t + 1 written, c_{t+1} sampled with u[..., t] into
    codes[..., t].

    forward(token [B, 1], k, v [L, B, kv, S, d], t [1], u [B, 15] or [15], codes [B, 15 + 1] or [15 + 1]) -> c_{t+1}
    [B, 1]: one module (one graph) for every t; clock: told where the phases end (`helpers.method.clock.AR_PHASES`)."""

    def __init__(self, step: FusedStep, sampler: SamplerConfig):
        super().__init__()
        self.step, self.sampler = step, sampler

    @classmethod
    def build(cls, core: FusedCore, sampler: SamplerConfig) -> "ARStep":
        """The AR step over `core` (the AR verify call, q = 1): how every decoder and timing assembles one."""
        return cls(FusedStep(core, None), sampler)

    def forward(self, token, k, v, t, u, codes, clock=None):
        logits, k_new, v_new = self.step(token, k, v, t, clock)[:3]
        _mark(clock, "heads")
        commit_kv(k, v, t + 1, k_new, v_new)
        _mark(clock, "commit")
        c = sample(target_probs(logits[:, 0], self.sampler), u.index_select(-1, t).reshape(-1))   # [B]
        codes.index_copy_(-1, t, c.view(codes.shape[:-1] + (1,)))
        _mark(clock, "sample")
        return c[:, None]


class ARFrame(nn.Module):
    """A whole AR frame, the one AR loop: `Prefill`, then `ARStep` at t = 1..14, each given its position as a
    device tensor made once (no host data in the loop, so captured it is one graph). forward(g [B, Ht], c0 [B], k, v,
    u [B, 15] or [15], codes [B, 15 + 1] or [15 + 1], clock=None) -> c15 [B, 1]; the codes in `codes`. prefill, step:
    the modules (eager: `ARDecoder`, which passes a clock), or their compiled versions (one compiled step serves every
    t; no clock)."""

    def __init__(self, prefill: nn.Module, step: nn.Module, num_codes: int, device: torch.device):
        super().__init__()
        self.prefill, self.step, self.num_codes = prefill, step, num_codes
        self.positions = [torch.full((1,), t, device=device) for t in range(num_codes)]   # t [1] each, on the device

    def forward(self, g, c0, k, v, u, codes, clock=None):
        phases = {} if clock is None else {"clock": clock}
        token = self.prefill(g, c0, k, v, u, codes, **phases)
        _mark(clock, "prefill")
        for t in range(1, self.num_codes):
            token = self.step(token, k, v, self.positions[t], u, codes, **phases)
        return token


class Round(nn.Module):
    """One round over one (pruned or full) tree. forward(query [1, q], k, v [L, 1, kv, S, d], t [1], u [15] float64,
    codes [15 + 1], clock=None) -> (next query [1, q], t_new [1], candidates [D, m]): the next round's root is
    c_{t_new}.

    step: the verify call for this tree (`FusedStep(core, tree, None, prenorm=drafter.prenorm)`: its states are r
    for a prenorm drafter); drafts: the draft phase. The caches, uniforms and codes are the decoder's own buffers,
    written in place; codes[15] is a spare slot that takes the writes of nothing (the path past the stop node).

    Any root t runs on any tree, so one module (one graph) serves a whole frame: nodes whose output would lie past
    c15 (t + depth >= 15) are never accepted, and a round rooted at t = 15 (the frame is done) writes no code and
    returns t_new = 15 (`RoundLoop` runs a fixed number of rounds). On a tree pruned for its t every mask is true."""

    def __init__(self, step: FusedStep, drafts: Drafts, sampler: SamplerConfig):
        super().__init__()
        if step.tree is None or step.fused_drafts:
            raise ValueError("a round verifies a tree without fused drafts: FusedStep(core, tree, None)")
        self.step, self.drafts, self.sampler = step, drafts, sampler
        self.n, self.slots = step.core.num_codes, step.core.slots
        self.index = TreeIndex(step.tree, step.core.heads.device)
        self.register_buffer("spare", torch.full((1,), self.n, device=step.core.heads.device), persistent=False)

    @classmethod
    def build(cls, core: FusedCore, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig) -> "Round":
        """The round of `tree` over `core`: its verify call (states r for a prenorm drafter) and its draft phase
        (depth and width of the tree): how every decoder and timing assembles one."""
        return cls(FusedStep(core, tree, None, prenorm=drafter.prenorm),
                   Drafts(core, drafter, tree.max_depth, max(tree.width)), sampler)

    def forward(self, query, k, v, t, u, codes, clock=None, until: str | None = None):
        """until: the round up to the end of one phase ("verify", "sample", "walk", "commit"), returning what that
        phase made (logits; ys; stop; t_new): how `compiled_round_profile` times each phase's share."""
        ix, n = self.index, self.n
        live = t < n                                                                             # [1]
        t_at = t.clamp(max=n - 1)                                                                # a row that exists
        # verify: target logits [1, q, V], the query's keys/values [L, 1, kv, q, d], states [1, q, H]
        logits, k_new, v_new, state = self.step(query, k, v, t_at, clock)
        _mark(clock, "heads")
        if until == "verify":
            return logits
        # accept: every token's sample (a depth-d token's output is c_{t+d+1}, drawn with u[t + d]), the walk
        position = t_at + ix.depth                                                               # [q]
        ys = sample(target_probs(logits[0], self.sampler), u.index_select(0, position.clamp(max=n - 1)))
        _mark(clock, "sample")
        if until == "sample":
            return ys
        stop = accept(query, ys[None], ix, position < n)                                         # [1]
        path = ix.paths.index_select(0, stop)[0]                                                 # [D + 1]
        depth = ix.depth.index_select(0, stop)                                                   # [1]
        _mark(clock, "walk")
        if until == "walk":
            return stop
        # commit: c_{t+1}.. of the root and the accepted path (the rest into the spare slot), and their keys/values
        written = live & (ix.steps <= depth)                                                     # [D + 1]
        codes.index_copy_(0, torch.where(written, t_at + ix.steps, self.spare), ys.index_select(0, path))
        commit_kv(k, v, (t_at + 1 + ix.steps).clamp(max=self.slots - 1), k_new.index_select(3, path),
                  v_new.index_select(3, path))
        t_new = t + (depth + 1) * live
        _mark(clock, "commit")
        if until == "commit":
            return t_new
        # draft: the next round's candidates from the stop node's state
        cand = self.drafts(state[0].index_select(0, stop), t_new)                               # [D, m]
        out = ix.query(ys.index_select(0, stop), cand[None])
        _mark(clock, "query")
        return out, t_new, cand
