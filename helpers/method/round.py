"""One speculative round, written once as its four phases, the prefill that opens a frame and the AR step.

A round is rooted at code position t: its root token is c_t, the code just sampled. With the frame's KV cache holding
[g, c0, .., c_{t-1}] (t + 1 slots) it runs four phases, every one on the device (`Round.phases`):

    verify  one call over the packed tree (`helpers.method.stack.FusedStep`): target logits [1, q, V], the query's
            keys/values and states
    accept  every query token sampled at once with its own position's uniform (a depth-d token's output is
            c_{t+d+1}, drawn with u[t + d]; `Round.draw`, the sampler of `helpers.method.sampler`); a node is
            accepted when it and every ancestor carry their parent's sample; the stop node is the deepest accepted
            one (`Round.walk`, over `accept`)
    commit  the codes c_{t+1}.. of the root and the accepted path, and their keys/values, written at fixed
            offsets (`Round.commit`: `commit_kv`, `index_copy_`): entries past the stop node land in slots the next
            round overwrites before any query sees them, so nothing has a data-dependent shape
    draft   the stop node's state h_s -> top-m candidates [D, m] for c_{s+1..s+D} (`Drafts`, over
            `helpers.method.drafters.top_candidates`), packed behind its sample into the next query [1, q]
            (`Round.draft`, `pack_query`)

`Round` is the module of one (pruned) tree: the same code runs eagerly, compiled by inductor, and captured as a CUDA
graph (`helpers.method.compiler`). `Round.phases` is the round itself, yielding at the end of each phase (`PHASES`),
so a measurement can stop it after any phase (`helpers.measure.phases`); `forward` runs it whole. `Prefill` opens a
frame (slots 0-1, c1, round 1's query); `ARStep` is the plain call (root c_t, no tree). The frame loops over them
live beside the decoder (`helpers.method.decoding`).
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.method.drafters import top_candidates
from helpers.method.sampler import SamplerConfig, draw
from helpers.method.kernels import RUNTIMES
from helpers.method.runtime_step import RuntimePrefill
from helpers.method.stack import FusedCore, FusedStep, commit_kv
from helpers.method.tree import SparseTree, TreeIndex

PHASES = ("verify", "sample", "walk", "commit", "draft")   # a round's phases, in order


def pack_query(index: TreeIndex, root: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """The one packing of a query: roots [B] (c_t), candidates [B, D', m'] (D' >= D, m' >= m of `index`'s tree)
    -> queries [B, q], each node's candidate behind the root (rounds, replay, round records, the walkthrough)."""
    return torch.cat((root[:, None], cand[:, index.node_depth, index.node_rank]), dim=1)


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
    """The draft phase: one state [1, H] at code position s [1] (a device tensor) -> top-m candidates [D, m] for
    c_{s+1..s+D}, from the core's stacked heads (rows past c15: meaningless, never read)."""

    def __init__(self, core: FusedCore, drafter, depth: int, width: int):
        super().__init__()
        self.core, self.drafter, self.depth, self.width = core, drafter, depth, width

    def forward(self, state: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return top_candidates(self.drafter, state, s, self.depth, self.width, self.core.heads)[0]


class Prefill(nn.Module):
    """Open a frame: [g, E0(c0)] into slots 0-1, c1 sampled with u[..., 0] into codes[..., 0]; with `drafts`, round
    1's query.

    forward(g [B, Ht], c0 [B], k, v, u [B, 15] or [15], codes [B, 15 + 1] or [15 + 1]) -> c1 [B, 1] (the AR loop's
    first token); with `drafts` (B = 1): (query [1, q], candidates [D, m])."""

    def __init__(self, core: FusedCore, sampler: SamplerConfig, drafts: Drafts | None = None,
                 index: TreeIndex | None = None):
        super().__init__()
        self.core, self.sampler, self.drafts, self.index = core, sampler, drafts, index
        self.call = core.prefill if core.predictor.kernel not in RUNTIMES else RuntimePrefill(core, drafts)
        device = core.heads.device
        self.register_buffer("slots", torch.arange(2, device=device), persistent=False)
        self.register_buffer("one", torch.ones(1, dtype=torch.long, device=device), persistent=False)

    def forward(self, g, c0, k, v, u, codes):
        prenorm = self.drafts is not None and self.drafts.drafter.prenorm
        logits, k_new, v_new, state = self.call(g, c0, k, v, prenorm)                  # state: h_1, or r_1
        commit_kv(k, v, self.slots, k_new, v_new)
        c1 = draw(logits, self.sampler, u[..., 0].reshape(-1))                        # [B]
        codes[..., :1] = c1.view(codes.shape[:-1] + (1,))
        if self.drafts is None:
            return c1[:, None]
        cand = self.drafts(state, self.one)
        return pack_query(self.index, c1, cand[None]), cand


class ARStep(nn.Module):
    """The plain call at root position t: c_t in, KV slot t + 1 written, c_{t+1} sampled with u[..., t] into
    codes[..., t].

    forward(token [B, 1], k, v [L, B, kv, S, d], t [1], u [B, 15] or [15], codes [B, 15 + 1] or [15 + 1]) -> c_{t+1}
    [B, 1]: one module (one graph) for every t."""

    def __init__(self, step: FusedStep, sampler: SamplerConfig):
        super().__init__()
        self.step, self.sampler = step, sampler

    @classmethod
    def build(cls, core: FusedCore, sampler: SamplerConfig, step: type = FusedStep) -> "ARStep":
        """The AR step over `core` (the AR verify call, q = 1; step: its class, `helpers.method.stack.ViewStep` for
        the CPU's eager call): how every decoder and timing assembles one."""
        return cls(step(core, None), sampler)

    def forward(self, token, k, v, t, u, codes):
        logits, k_new, v_new = self.step(token, k, v, t)[:3]                   # the call: logits [B, 1, V]
        self.commit(k, v, t, k_new, v_new)
        return self.draw(logits, t, u, codes)

    def commit(self, k, v, t, k_new, v_new) -> None:
        """c_t's keys/values k_new, v_new [L, B, kv, 1, d] into cache slot t + 1."""
        commit_kv(k, v, t + 1, k_new, v_new)

    def draw(self, logits, t, u, codes) -> torch.Tensor:
        """c_{t+1} [B, 1] from logits [B, 1, V] with u[..., t], written into codes[..., t]."""
        c = draw(logits[:, 0], self.sampler, u.index_select(-1, t).reshape(-1))                 # [B]
        codes.index_copy_(-1, t, c.view(codes.shape[:-1] + (1,)))
        return c[:, None]


class Round(nn.Module):
    """One round over one (pruned or full) tree. forward(query [1, q], k, v [L, 1, kv, S, d], t [1], u [15] float64,
    codes [15 + 1]) -> (next query [1, q], t_new [1], candidates [D, m]): the next round's root is c_{t_new}.

    step: the verify call for this tree (`FusedStep(core, tree, prenorm=drafter.prenorm)`: its states are r for a
    prenorm drafter); drafts: the draft phase. The caches, uniforms and codes are the decoder's own buffers,
    written in place; codes[15] is a spare slot that takes the writes of nothing (the path past the stop node).

    Any root t runs on any tree, so one module (one graph) serves a whole frame: nodes whose output would lie past
    c15 (t + depth >= 15) are never accepted, and a round rooted at t = 15 (the frame is done) writes no code and
    returns t_new = 15 (`RoundLoop` runs a fixed number of rounds). On a tree pruned for its t every mask is true."""

    def __init__(self, step: FusedStep, drafts: Drafts, sampler: SamplerConfig):
        super().__init__()
        if step.tree is None:
            raise ValueError("a round verifies a tree: FusedStep(core, tree)")
        self.step, self.drafts, self.sampler = step, drafts, sampler
        self.n, self.slots = step.core.num_codes, step.core.slots
        self.index = TreeIndex(step.tree, step.core.heads.device)
        self.register_buffer("spare", torch.full((1,), self.n, device=step.core.heads.device), persistent=False)

    @classmethod
    def build(cls, core: FusedCore, drafter, tree: SparseTree, sampler: SamplerConfig, step: type = FusedStep
              ) -> "Round":
        """The round of `tree` over `core`: its verify call (states r for a prenorm drafter; step: its class, as
        `ARStep.build`) and its draft phase (depth and width of the tree): how every decoder and timing assembles
        one."""
        return cls(step(core, tree, prenorm=drafter.prenorm),
                   Drafts(core, drafter, tree.max_depth, max(tree.width)), sampler)

    def forward(self, query, k, v, t, u, codes):
        for _, made in self.phases(query, k, v, t, u, codes):
            pass
        return made

    def phases(self, query, k, v, t, u, codes):
        """The round, phase by phase: yields (phase, what it made) at the end of each, in `PHASES`' order; the last,
        draft, made forward's outputs."""
        t_at = t.clamp(max=self.n - 1)                                         # a row that exists (t = 15: done)
        logits, k_new, v_new, state = self.step(query, k, v, t_at)
        yield "verify", logits                                                 # logits [1, q, V]
        position = t_at + self.index.depth                                     # accept: token at depth d -> c_{t+d+1}
        ys = self.draw(logits[0], position, u)
        yield "sample", ys                                                     # every token's sample [q]
        stop = self.walk(query, ys, position)
        yield "walk", stop                                                     # the stop node [1]
        t_new = self.commit(t, t_at, stop, ys, k_new, v_new, k, v, codes)
        yield "commit", t_new                                                  # the next root position [1]
        query, cand = self.draft(state, stop, ys, t_new)
        yield "draft", (query, t_new, cand)                                    # the next round's query

    def draw(self, logits: torch.Tensor, position: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """logits [q, V], code positions [q] (t + depth) -> each token's sample [q], drawn with u[position]."""
        return draw(logits, self.sampler, u.index_select(0, position.clamp(max=self.n - 1)))

    def walk(self, query: torch.Tensor, ys: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """query, ys [q] -> the stop node [1]: the deepest node accepted, none whose output lies past c15."""
        return accept(query, ys[None], self.index, position < self.n)

    def commit(self, t, t_at, stop, ys, k_new, v_new, k, v, codes) -> torch.Tensor:
        """c_{t+1}.. of the root and the accepted path into codes (the rest into the spare slot), their keys/values
        k_new, v_new [L, 1, kv, q, d] into slots t + 2.. of k, v -> t_new [1] (t = 15: nothing written, t_new = 15)."""
        ix = self.index
        live = t < self.n                                                                        # [1]
        path = ix.paths.index_select(0, stop)[0]                                                 # [D + 1]
        depth = ix.depth.index_select(0, stop)                                                   # [1]
        written = live & (ix.steps <= depth)                                                     # [D + 1]
        codes.index_copy_(0, torch.where(written, t_at + ix.steps, self.spare), ys.index_select(0, path))
        commit_kv(k, v, (t_at + 1 + ix.steps).clamp(max=self.slots - 1), k_new.index_select(3, path),
                  v_new.index_select(3, path))
        return t + (depth + 1) * live

    def draft(self, state, stop, ys, t_new) -> tuple[torch.Tensor, torch.Tensor]:
        """The next round's query from the stop node: candidates [D, m] drafted from its state (states [1, q, H]),
        packed behind its sample c_{t_new} -> (query [1, q], candidates [D, m])."""
        cand = self.drafts(state[0].index_select(0, stop), t_new)
        return pack_query(self.index, ys.index_select(0, stop), cand[None]), cand
