"""Decoding one frame's residual codes c1..c15 from (g, c0): one decoder, autoregressive or speculative.

`Decoder(predictor, sampler, drafter, tree, compile_mode, rounds_per_graph)`; decode_frame(g [B, H], c0 [B],
u [B, 15]) -> FrameResult. Every mode samples code position t with the frame's uniform u_t through the shared
sampler, so for the same uniforms every mode returns the same codes; only the number of calls differs. Every mode
runs the modules of `helpers.method.round` (`DecoderModules`: the prefill, the AR step or the tree's round, and
their verify call, built once) through one runner:

- `ARRunner` (drafter and tree None): the whole AR frame, `ARFrame`, one module call (eagerly any batch; captured
  with rounds_per_graph (14, any): one graph).
- `HostRounds` (rounds_per_graph None): the prefill, then one `Round` call per round, the host reading the next
  root position after each (none after a round rooted at c14, which ends the frame).
- `RoundGraphs` (rounds_per_graph (first, then)): `SpeculativeFrame` (the prefill and `first` rounds), then
  `RoundLoop`s of `then` rounds, each one module (one captured graph), one host read per graph.

A round rooted near c15 runs the whole tree with the nodes whose output lies past c15 masked (never accepted), so
one module serves every root position and any number of rounds fits a graph. compile_mode: "none", "inductor",
"cuda_graph", "inductor_graph" (`helpers.method.compiler`). The eager host loop on a CPU calls `ViewStep` (rows as
views at a host int, any kernel), a runtime deployment its `RuntimeStep`, everything else the gathered `FusedStep`.
The weights are laid out once, when the decoder is built (`decoder_core`). The decoder times nothing: measurements
take its modules (`Decoder.modules`) and time them from outside (`helpers.measure`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import nn

from helpers.method.compiler import CallCompiler
from helpers.method.drafters import Drafter
from helpers.method.kernels import RUNTIMES
from helpers.method.predictor import CodePredictor
from helpers.method.runtime_step import RuntimeStep
from helpers.method.round import ARStep, Prefill, Round
from helpers.method.sampler import SamplerConfig
from helpers.method.stack import FusedCore, FusedStep, ViewStep
from helpers.method.tree import SparseTree, TreeIndex


@dataclass
class FrameResult:
    """codes [B, 15] (c1..c15); calls = model calls for the frame; accepted = drafts accepted per round (the host
    loop); drafts: (t, candidates [D, m]) of each round rooted before c14, the table its nodes were picked from (the
    eager host loop); reads: the decoder's host reads of device values in the frame (a device sync each)."""

    codes: torch.Tensor
    calls: int
    accepted: list[int] = field(default_factory=list)
    drafts: list[tuple[int, torch.Tensor]] = field(default_factory=list, repr=False)
    reads: int = 0

    @property
    def tokens_per_step(self) -> float:
        return self.codes.shape[-1] / self.calls


class DecoderModules(NamedTuple):
    """The modules a decoder runs, as built (before any compiling): what a measurement times, clocks or counts.
    prefill: `Prefill`; step: the AR call `ARStep` (AR) or the tree's `Round`; verify: step's verify call."""

    prefill: Prefill
    step: ARStep | Round
    verify: nn.Module


def decoder_core(predictor: CodePredictor, core: FusedCore | None = None) -> FusedCore:
    """A decoder's fused core, its weights laid out as they are now: `core` where one is given (shared with other
    decoders of `predictor`; laid out again if the official weights changed since), else the predictor's own stack
    (`CodePredictor.stack`: one copy of the weights for its calls and all its dense decoders), or for a deployment
    kernel a new core of that kernel (a backend keeps one)."""
    if core is None:
        return predictor.stack if predictor.kernel == "dense" else FusedCore(predictor)
    if core.predictor is not predictor:
        raise ValueError("the shared core belongs to another predictor; a decoder's core is its predictor's")
    core.refresh()
    return core


def verify_type(predictor: CodePredictor, views: bool | None = None) -> type:
    """The eager host loop's verify call: a runtime's (`helpers.method.runtime_step.RuntimeStep`, kernel in
    `RUNTIMES`), else `ViewStep` (views True; default None: on a CPU) or the gathered `FusedStep`."""
    if predictor.kernel in RUNTIMES:
        return RuntimeStep
    return ViewStep if (predictor.device.type == "cpu" if views is None else views) else FusedStep


def first_rounds(tokens_per_step: float, num_codes: int = 15) -> int:
    """Rounds of the first graph for a decoder of this (measured or expected) tokens/step: the rounds an average
    frame needs, 15 / tokens_per_step - 1 (the prefill is a call), rounded up."""
    if not tokens_per_step >= 1.0:
        raise ValueError(f"tokens/step must be at least 1, got {tokens_per_step!r}")
    return max(1, min(num_codes - 1, math.ceil(num_codes / tokens_per_step - 1 - 1e-9)))


def check_decoder(predictor: CodePredictor, drafter, tree, rounds_per_graph) -> None:
    """Clear errors for a drafter without a tree, a tree deeper than the drafter's K or longer than the query, and
    rounds per graph outside 1..14 (AR: 14, its whole frame)."""
    n = predictor.num_codes
    if (drafter is None) != (tree is None):
        raise ValueError("a speculative decoder takes a drafter and a tree, the AR decoder neither")
    if tree is not None and tree.max_depth > drafter.depth:
        raise ValueError(f"tree depth {tree.max_depth} exceeds the drafter's K={drafter.depth}; "
                         f"allowed tree depth: 1..{drafter.depth}")
    if tree is not None and tree.size + 1 > predictor.max_query:
        raise ValueError(f"tree of {tree.size} nodes needs a query of {tree.size + 1} tokens; "
                         f"the predictor allows max_query={predictor.max_query}")
    for name, value in zip(("first", "then"), rounds_per_graph or ()):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n - 1:
            raise ValueError(f"{name}={value!r} rounds per graph; allowed: an integer in 1..{n - 1}")
    if tree is None and rounds_per_graph is not None and rounds_per_graph[0] != n - 1:
        raise ValueError(f"the AR frame has a fixed length: rounds_per_graph None (the host loop) or "
                         f"({n - 1}, any) (the whole frame one module), got {rounds_per_graph}")


class Decoder:
    """Decode frames: the AR loop (drafter, tree None) or speculative decoding with `drafter` over `tree`.

    sampler: the talker's sampling settings; compile_mode, rounds_per_graph: see the module docstring;
    torch_backend: torch.compile's backend (tests: "aot_eager"); core: a `FusedCore` of `predictor` to share; views:
    the eager host loop's call (default None: `ViewStep` on a CPU). Buffers (`buffers`: caches k, v, uniforms u,
    codes) are the decoder's own, made per batch size: a captured graph reads and writes them in place (batch 1)."""

    def __init__(self, predictor: CodePredictor, sampler: SamplerConfig, drafter: Drafter | None = None,
                 tree: SparseTree | None = None, compile_mode: str = "none",
                 rounds_per_graph: tuple[int, int] | None = None, torch_backend: str | None = None,
                 core: FusedCore | None = None, views: bool | None = None):
        check_decoder(predictor, drafter, tree, rounds_per_graph)
        self.predictor, self.sampler, self.drafter, self.tree = predictor, sampler, drafter, tree
        self.compile_mode, self.rounds_per_graph, self.n = compile_mode, rounds_per_graph, predictor.num_codes
        self.compiler = CallCompiler(compile_mode, predictor.device, torch_backend)
        eager = compile_mode == "none" and rounds_per_graph is None
        verify = verify_type(predictor, views) if eager else FusedStep
        if verify is FusedStep and predictor.kernel != "dense":
            raise ValueError(f"compiled decoders take a predictor with kernel 'dense' (their calls gather rows by "
                             f"index), this one has {predictor.kernel!r}: pass predictor.with_kernel('dense')")
        self.core = decoder_core(predictor, core)
        self.states: dict[int, list[torch.Tensor]] = {}
        self.indices: dict[SparseTree, TreeIndex] = {}
        if tree is None:
            step = ARStep.build(self.core, sampler, verify)
            prefill = Prefill(self.core, sampler)
        else:
            step = Round.build(self.core, drafter, tree, sampler, verify)
            prefill = Prefill(self.core, sampler, step.drafts, step.index)
        self.modules = DecoderModules(prefill, step, step.step)
        runner = ARRunner if tree is None else HostRounds if rounds_per_graph is None else RoundGraphs
        self.runner = runner(self)
        self.batched = eager and tree is None and predictor.kernel not in RUNTIMES   # eager AR: any batch at once

    def buffers(self, batch: int) -> list[torch.Tensor]:
        """The decoder's buffers for `batch` streams, made once per batch size: caches k, v [L, B, kv, S, d], the
        frame's uniforms u (float64) and codes (long: c1..c15 and a spare slot a round writes what it discards into),
        [15] and [15 + 1] at batch 1 (what the rounds take), else [B, 15] and [B, 15 + 1]."""
        if batch not in self.states:
            lead, device = (() if batch == 1 else (batch,)), self.predictor.device
            self.states[batch] = [*self.core.empty_cache(batch),
                                  torch.zeros(*lead, self.n, dtype=torch.float64, device=device),
                                  torch.zeros(*lead, self.n + 1, dtype=torch.long, device=device)]
        return self.states[batch]

    def index(self, t: int) -> TreeIndex | None:
        """The tables of the nodes a round rooted at c_t may accept: the tree pruned at depth 14 - t (None at c14:
        the root alone). What the walk-throughs and replays rebuild a round from (built on first use)."""
        sub = self.tree.pruned(self.n - 1 - t)
        if sub is not None and sub not in self.indices:
            self.indices[sub] = TreeIndex(sub, self.predictor.device)
        return None if sub is None else self.indices[sub]

    def check(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> None:
        """Raise for inputs the frame cannot take: shapes, c0 outside its vocabulary (host reads), a batch of several
        frames where a speculative or compiled decoder decodes one stream."""
        if g.dim() != 2 or c0.dim() != 1 or g.shape[0] != c0.shape[0]:
            raise ValueError(f"expected g [B, H] and c0 [B], got {tuple(g.shape)} and {tuple(c0.shape)}")
        if tuple(u.shape) != (g.shape[0], self.n):
            raise ValueError(f"expected uniforms [B={g.shape[0]}, {self.n}], got {tuple(u.shape)}")
        if g.shape[0] != 1 and not self.batched:
            raise ValueError(f"the speculative, compiled and runtime decoders decode one stream at a time, got batch "
                             f"{g.shape[0]}")
        self.predictor.check_codes(c0[:, None], first_pos=0)

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        """c1..c15 of a batch of frames (speculative or compiled: B = 1). g [B, H], c0 [B], u [B, 15]."""
        self.check(g, c0, u)
        return self.run(g, c0, u)

    @torch.no_grad()
    def run(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        """The frame itself, on inputs `check` has passed: the runner fills the codes buffer."""
        buffers = self.buffers(g.shape[0])
        buffers[2].copy_(u.reshape(buffers[2].shape))
        calls, reads, accepted, drafts = self.runner(g, c0, buffers)
        return FrameResult(buffers[3][..., :self.n].clone().view(g.shape[0], self.n), calls, accepted, drafts, reads)


# ------------------------------------------------------------------ the runners: one per mode
class ARRunner:
    """The AR frame as one module call, `ARFrame` over the decoder's prefill and step: eager, or each compiled
    (one compiled step serves every t), or the whole frame captured as one graph (rounds_per_graph given).
    __call__(g, c0, buffers) -> (calls 15, host reads 0, no rounds, no drafts)."""

    def __init__(self, decoder: Decoder):
        prefill, step, _ = decoder.modules
        compiler, buffers, device = decoder.compiler, decoder.buffers(1), decoder.predictor.device
        if decoder.rounds_per_graph is None:
            self.frame = ARFrame(compiler(prefill, buffers), compiler(step, buffers), decoder.n, device)
        else:
            frame = ARFrame(compiler.kernels(prefill), compiler.kernels(step), decoder.n, device)
            self.frame = compiler.capture(frame, buffers)
        self.n = decoder.n

    def __call__(self, g, c0, buffers):
        self.frame(g, c0, *buffers)
        return self.n, 0, [], []


class HostRounds:
    """Speculative, the host driving the rounds: the prefill, then one `Round` call per round, one host read of the
    next root position after each (none after a round rooted at c14: it ends the frame). The eager loop records
    each round's drafts (`FrameResult.drafts`). __call__(g, c0, buffers) -> (calls, host reads, accepted, drafts)."""

    def __init__(self, decoder: Decoder):
        prefill, round, _ = decoder.modules
        compiler, buffers, device = decoder.compiler, decoder.buffers(1), decoder.predictor.device
        self.prefill, self.round = compiler(prefill, buffers), compiler(round, buffers)
        self.n, self.tree, self.depth = decoder.n, decoder.tree, round.index.depth_max
        self.records = decoder.compile_mode == "none"
        self.positions = [torch.full((1,), t, device=device) for t in range(decoder.n)]   # root positions [1]

    def __call__(self, g, c0, buffers):
        k, v, u, codes = buffers
        n, calls, reads, accepted, drafts = self.n, 1, 0, [], []
        query, cand = self.prefill(g, c0, *buffers)                                      # [1, N + 1], [D, m]
        t = 1
        while t < n:
            if self.records and t < n - 1:                              # the depths this round may accept
                depth = min(self.depth, n - 1 - t)
                drafts.append((t, cand[:depth, :max(self.tree.width[:depth])]))
            query, t_new, cand = self.round(query, k, v, self.positions[t], u, codes)
            t_next = int(t_new) if t < n - 1 else n                  # the one host read per round; c14's ends it
            reads += t < n - 1
            accepted.append(t_next - t - 1)
            t, calls = t_next, calls + 1
        return calls, reads, accepted, drafts


class RoundGraphs:
    """Speculative, k rounds per graph: `first` = `SpeculativeFrame` (the prefill and the first rounds), then
    `then` = a `RoundLoop` until the frame is done, each compiled and captured once over `progress` (the next query
    [1, q], root position t [1], rounds done [1]) and the buffers; one host read per graph.
    __call__(g, c0, buffers) -> (calls, host reads, no rounds, no drafts)."""

    def __init__(self, decoder: Decoder):
        prefill, round, _ = decoder.modules
        compiler, buffers, device, n = decoder.compiler, decoder.buffers(1), decoder.predictor.device, decoder.n
        first, then = decoder.rounds_per_graph
        self.progress = [torch.zeros(1, round.index.q, dtype=torch.long, device=device),
                         torch.ones(1, dtype=torch.long, device=device),
                         torch.zeros(1, dtype=torch.long, device=device)]
        compiled = compiler.kernels(round)                              # compiled once, called by both graphs
        state = self.progress + buffers
        self.first = compiler.capture(SpeculativeFrame(compiler.kernels(prefill), RoundLoop(compiled, first, n)),
                                      state)
        self.then = compiler.capture(RoundLoop(compiled, then, n), state)
        self.n = n

    def __call__(self, g, c0, buffers):
        rounds, t = divmod(int(self.first(g, c0, *self.progress, *buffers)), self.n + 1)   # one read per graph
        reads = 1
        while t < self.n:
            rounds, t = divmod(int(self.then(*self.progress, *buffers)), self.n + 1)
            reads += 1
        return 1 + rounds, reads, [], []


# ------------------------------------------------------------------ the frame loops as modules (one graph each)
class ARFrame(nn.Module):
    """A whole AR frame: `Prefill`, then `ARStep` at t = 1..14, each given its position as a device tensor made
    once (no host data in the loop, so captured it is one graph). forward(g [B, Ht], c0 [B], k, v, u [B, 15] or
    [15], codes [B, 15 + 1] or [15 + 1]) -> c15 [B, 1]; the codes in `codes`. prefill, step: the modules or their
    compiled versions (one compiled step serves every t)."""

    def __init__(self, prefill: nn.Module, step: nn.Module, num_codes: int, device: torch.device):
        super().__init__()
        self.prefill, self.step, self.num_codes = prefill, step, num_codes
        self.positions = [torch.full((1,), t, device=device) for t in range(num_codes)]   # t [1] each, on the device

    def forward(self, g, c0, k, v, u, codes):
        token = self.prefill(g, c0, k, v, u, codes)
        for t in range(1, self.num_codes):
            token = self.step(token, k, v, self.positions[t], u, codes)
        return token


class RoundLoop(nn.Module):
    """`count` rounds of one full-tree `Round`, in place on the frame's buffers.

    forward(query [1, q], t [1], rounds [1], k, v, u [15], codes [15 + 1]) -> status [1] = rounds * 16 + t (16:
    num_codes + 1), one integer, so one host read: t the next root position (15: the frame is done), rounds the
    rounds that did work so far (calls = rounds + 1, the prefill)."""

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
        return done * (self.num_codes + 1) + position


class SpeculativeFrame(nn.Module):
    """`Prefill` (c1 and round 1's query), then `RoundLoop`. forward(g [1, Ht], c0 [1], query, t, rounds, k, v, u,
    codes) -> status [1], as `RoundLoop`."""

    def __init__(self, prefill: Prefill, loop: RoundLoop):
        super().__init__()
        self.prefill, self.loop = prefill, loop

    def forward(self, g, c0, query, t, rounds, k, v, u, codes):
        q, _ = self.prefill(g, c0, k, v, u, codes)
        query.copy_(q)
        t.fill_(1)
        rounds.zero_()
        return self.loop(query, t, rounds, k, v, u, codes)


def frame_decoders(predictor: CodePredictor, drafter: Drafter, trees: dict, sampler: SamplerConfig,
                   views: bool | None = None) -> tuple[Decoder, dict]:
    """The eager decoders a comparison runs side by side, all over one fused core (one weight copy): the AR decoder
    and a speculative one per tree. trees {N: SparseTree} -> (ar, {N: decoder})."""
    core = decoder_core(predictor)
    return (Decoder(predictor, sampler, core=core, views=views),
            {n: Decoder(predictor, sampler, drafter, tree, core=core, views=views) for n, tree in trees.items()})
