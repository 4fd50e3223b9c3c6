"""One speculative round, written once: draft, verify, sample, accept, commit; the AR step and both frame loops.

A round is rooted at code position t: its root token is c_t, the code just sampled. With the frame's KV cache holding
[g, c0, .., c_{t-1}] (t + 1 slots) it runs four phases, every one on the device:

    draft   the stop node's state h_s -> top-m candidates [D, m] for c_{s+1..s+D} (`top_candidates`, over the one
            drafting function `Drafter.draft_logits`), packed behind the root into the next query [1, q]
            (`TreeIndex.query`)
    verify  one call over the packed tree (`helpers.method.stack.FusedStep`): target logits [1, q, V], the query's
            keys/values and states
    accept  every query token sampled at once with its own position's uniform (a depth-d token's output is
            c_{t+d+1}, drawn with u[t + d]; `sample`); a node is accepted when it and every ancestor carry their
            parent's sample; the stop node is the deepest accepted one (`accept`)
    commit  the codes c_{t+1}.. of the root and the accepted path, and their keys/values, written at fixed
            offsets (`commit_kv`, `index_copy_`): entries past the stop node land in slots the next round
            overwrites before any query sees them, so nothing has a data-dependent shape

The sampler is the official sub-talker's (transformers' temperature, top-k and top-p warpers, then a categorical
draw), drawn by inverse CDF from a uniform that belongs to the code position, not to the call: a frame's randomness
is drawn up front, one uniform u_t per code position (`frame_uniforms`), so AR and speculative decoding consume it
identically. Each position is sampled exactly once, from its exact conditional, with its own uniform: the codes
equal the AR decoder's for the same uniforms, however many drafts a round accepts (docs/method.md).

`Round` is the module of one (pruned) tree: the same code runs eagerly, compiled by inductor, and captured as a CUDA
graph (`helpers.method.decoding`). `Prefill` opens a frame (slots 0-1, c1, round 1's query); `ARStep` is the plain
call (root c_t, no tree) and `ARFrame` the whole AR frame over it. `RoundLoop` runs k full-tree rounds in place and
`SpeculativeFrame` opens a frame and runs the first k: a fixed list of kernels, so each is one captured graph, which
`CapturedGraph` captures at its first call and replays at every later one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from helpers.method.checks import positive_int
from helpers.method.stack import FusedCore, FusedStep, commit_kv
from helpers.method.tree import SparseTree


# ------------------------------------------------------------------ the sampler
@dataclass(frozen=True)
class SamplerConfig:
    """Deployed sub-talker sampling: `subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=0.9`."""

    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9

    def __post_init__(self):
        positive_int("top_k", self.top_k)
        if not 0.0 < float(self.top_p) <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not float(self.temperature) > 0.0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")


def target_probs(logits: torch.Tensor, cfg: SamplerConfig) -> torch.Tensor:
    """p = softmax(top_p(top_k(logits / T))), in at least float32. [..., V] -> [..., V]."""
    scores = logits.to(torch.promote_types(logits.dtype, torch.float32)) / cfg.temperature
    k = min(cfg.top_k, scores.shape[-1])
    kth = torch.topk(scores, k, dim=-1).values[..., -1:]
    scores = scores.masked_fill(scores < kth, float("-inf"))
    if cfg.top_p < 1.0:
        ordered, order = torch.sort(scores, dim=-1)                 # ascending, as transformers does
        cum = ordered.softmax(-1).cumsum(-1)
        drop = cum <= 1.0 - cfg.top_p
        drop[..., -1] = False                                       # keep at least the top token
        scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return scores.softmax(-1)


def sample(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw in vocabulary order. probs [..., V], u [...] in [0, 1) -> tokens [...] (long)."""
    cdf = probs.cumsum(-1)
    x = (u.to(cdf.dtype) * cdf[..., -1]).unsqueeze(-1)
    tokens = torch.searchsorted(cdf, x, right=True).squeeze(-1)
    last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).to(torch.int8).argmax(-1)   # never a zero-mass token
    return torch.minimum(tokens, last)


def frame_uniforms(generator: torch.Generator | None, num_codes: int = 15, batch: int | None = None,
                   device=None) -> torch.Tensor:
    """One frame's randomness: u [num_codes] (or [batch, num_codes]); column t-1 belongs to c_t."""
    shape = (num_codes,) if batch is None else (batch, num_codes)
    gen_device = generator.device if generator is not None else "cpu"
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=gen_device).to(device or gen_device)


# ------------------------------------------------------------------ the round
ROUND_PHASES = ("verify", "sample", "walk", "commit")       # `Round(until=...)`: the round up to a phase's end


def mark(clock, phase: str) -> None:
    """Tell `clock` (a `helpers.method.clock.PhaseClock`, or None: nothing) that `phase` ended."""
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


def top_candidates(drafter, h: torch.Tensor, t, depth: int, width: int,
                   heads: torch.Tensor | None = None) -> torch.Tensor:
    """Draft, take the top m: the candidates [n, depth, width] (long, by rank) for c_{t+1..t+depth} from the states
    h [n, H], by `helpers.method.drafters.Drafter.draft_logits` (t an int or a [1] device tensor; heads as there).
    Every round, replay, calibration and the walkthrough draft through here; `TreeIndex.query` packs them."""
    return drafter.draft_logits(h, t, depth, heads).topk(width, dim=-1).indices


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
    def build(cls, core: FusedCore, sampler: SamplerConfig, step: type = FusedStep) -> "ARStep":
        """The AR step over `core` (the AR verify call, q = 1; step: its class, `helpers.method.views.ViewStep` for
        the CPU's eager call): how every decoder and timing assembles one."""
        return cls(step(core, None), sampler)

    def forward(self, token, k, v, t, u, codes, clock=None):
        logits, k_new, v_new = self.step(token, k, v, t, clock)[:3]
        mark(clock, "heads")
        commit_kv(k, v, t + 1, k_new, v_new)
        mark(clock, "commit")
        c = sample(target_probs(logits[:, 0], self.sampler), u.index_select(-1, t).reshape(-1))   # [B]
        codes.index_copy_(-1, t, c.view(codes.shape[:-1] + (1,)))
        mark(clock, "sample")
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
        mark(clock, "prefill")
        for t in range(1, self.num_codes):
            token = self.step(token, k, v, self.positions[t], u, codes, **phases)
        return token


class Round(nn.Module):
    """One round over one (pruned or full) tree. forward(query [1, q], k, v [L, 1, kv, S, d], t [1], u [15] float64,
    codes [15 + 1], clock=None) -> (next query [1, q], t_new [1], candidates [D, m]): the next round's root is
    c_{t_new}.

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

    def forward(self, query, k, v, t, u, codes, clock=None, until: str | None = None):
        """until: the round up to the end of one phase ("verify", "sample", "walk", "commit"), returning what that
        phase made (logits; ys; stop; t_new): how `compiled_round_profile` times each phase's share."""
        ix, n = self.index, self.n
        live = t < n                                                                             # [1]
        t_at = t.clamp(max=n - 1)                                                                # a row that exists
        # verify: target logits [1, q, V], the query's keys/values [L, 1, kv, q, d], states [1, q, H]
        logits, k_new, v_new, state = self.step(query, k, v, t_at, clock)
        mark(clock, "heads")
        if until == "verify":
            return logits
        # accept: every token's sample (a depth-d token's output is c_{t+d+1}, drawn with u[t + d]), the walk
        position = t_at + ix.depth                                                               # [q]
        ys = sample(target_probs(logits[0], self.sampler), u.index_select(0, position.clamp(max=n - 1)))
        mark(clock, "sample")
        if until == "sample":
            return ys
        stop = accept(query, ys[None], ix, position < n)                                         # [1]
        path = ix.paths.index_select(0, stop)[0]                                                 # [D + 1]
        depth = ix.depth.index_select(0, stop)                                                   # [1]
        mark(clock, "walk")
        if until == "walk":
            return stop
        # commit: c_{t+1}.. of the root and the accepted path (the rest into the spare slot), and their keys/values
        written = live & (ix.steps <= depth)                                                     # [D + 1]
        codes.index_copy_(0, torch.where(written, t_at + ix.steps, self.spare), ys.index_select(0, path))
        commit_kv(k, v, (t_at + 1 + ix.steps).clamp(max=self.slots - 1), k_new.index_select(3, path),
                  v_new.index_select(3, path))
        t_new = t + (depth + 1) * live
        mark(clock, "commit")
        if until == "commit":
            return t_new
        # draft: the next round's candidates from the stop node's state
        cand = self.drafts(state[0].index_select(0, stop), t_new)                               # [D, m]
        out = ix.query(ys.index_select(0, stop), cand[None])
        mark(clock, "query")
        return out, t_new, cand


# ------------------------------------------------------------------ k rounds per graph, and the graph
class RoundLoop(nn.Module):
    """`count` rounds of one full-tree `Round`, in place on the frame's buffers.

    forward(query [1, q], t [1], rounds [1], k, v, u [15], codes [15 + 1]) -> status [2] = (t, rounds): the next
    root position (15: the frame is done) and the rounds that did work so far (calls = rounds + 1, the prefill)."""

    def __init__(self, round: nn.Module, count: int, num_codes: int):
        super().__init__()
        self.round, self.count, self.num_codes = round, count, num_codes

    def forward(self, query, t, rounds, k, v, u, codes):
        q, position, done = query, t, rounds
        for _ in range(self.count):
            done = done + (position < self.num_codes).long()
            q, position, _ = self.round(q, k, v, position, u, codes)
        query.copy_(q)
        t.copy_(position)
        rounds.copy_(done)
        return torch.cat((t, rounds))


class SpeculativeFrame(nn.Module):
    """`Prefill` (c1 and round 1's query), then `RoundLoop`. forward(g [1, Ht], c0 [1], query, t, rounds, k, v, u,
    codes) -> status [2] = (t, rounds), as `RoundLoop`."""

    def __init__(self, prefill: Prefill, loop: RoundLoop):
        super().__init__()
        self.prefill, self.loop = prefill, loop

    def forward(self, g, c0, query, t, rounds, k, v, u, codes):
        q, _ = self.prefill(g, c0, k, v, u, codes)
        query.copy_(q)
        t.fill_(1)
        rounds.zero_()
        return self.loop(query, t, rounds, k, v, u, codes)


class CapturedGraph:
    """A module replayed from one CUDA graph, captured at its first call (the one capture: decoders and the call
    timings). state: the decoder's buffers, passed by identity (the graph reads and writes them in place); other
    arguments are copied into the graph's static inputs at each call; returns the static outputs. The capture runs
    three warm-up calls on a side stream first and restores the state after them, so the first replay starts from
    the state it was given; booked(seconds): told how long the capture took."""

    def __init__(self, fn: nn.Module, state: list[torch.Tensor], booked=None):
        self.fn, self.state, self.booked, self.graph = fn, state, booked, None

    def capture(self, args: tuple) -> None:
        start = time.perf_counter()
        self.static = [a if any(a is s for s in self.state) else a.clone() for a in args]
        saved = [s.clone() for s in self.state]      # warm-up calls write the state: the first replay starts over
        stream = torch.cuda.Stream(device=args[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                self.fn(*self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = self.fn(*self.static)
        for s, before in zip(self.state, saved):
            s.copy_(before)
        if self.booked is not None:
            self.booked(time.perf_counter() - start)

    def __call__(self, *args):
        if self.graph is None:
            self.capture(args)
        for s, a in zip(self.static, args):
            if s is not a:
                s.copy_(a)
        self.graph.replay()
        return self.out
