"""Decoding one frame's residual codes c1..c15 from (g, c0): one decoder, autoregressive or speculative.

`Decoder(predictor, sampler, drafter, tree, compile, rounds_per_graph)`; decode_frame(g [B, H], c0 [B], u [B, 15])
-> FrameResult. Every mode samples code position t with the frame's uniform u_t through the shared sampler, so for
the same uniforms every mode returns the same codes; only the number of calls differs. All run the modules of
`helpers.method.round` over the verify call of `helpers.method.stack`, so a speed comparison compares the calls.

- AR (drafter and tree None): `ARFrame`, a prefill, then one `ARStep` per code (15 calls); eagerly any batch.
- speculative: a prefill, then one `Round` of the whole tree per round. A frame ends one way: a round rooted near
  c15 runs the whole tree with the nodes whose output lies past c15 masked (never accepted), so one module serves
  every root position and any number of rounds fits a graph.
- rounds_per_graph None: the host loop, one module call per round; a speculative frame reads the next root position
  after each round (none after a round rooted at c14, which ends the frame). (first, then): the host out of the
  loop, `SpeculativeFrame` (prefill and `first` rounds) then `RoundLoop`s of `then` rounds, one host read per
  graph (t and the rounds done, `RoundLoop`); AR takes first = 14, its whole frame one module.
- compile: "none", "inductor", "cuda_graph", "inductor_graph" (`helpers.method.compiler`).

The eager host loop on a CPU calls `helpers.method.views.ViewStep` (rows as views at a host int, any kernel;
`views`), everything else the gathered `FusedStep` (kernel 'dense'). The weights are laid out once, when the decoder
is built (`decoder_core`: the predictor's own stack, or one core per deployment kernel, never a second copy);
`reload()` lays them out again after the official weights change. `decode_frame` checks its inputs (`check`: host
reads of c0), then runs the frame (`run`: what `helpers.measure.kernel_counts` counts). The decoder times nothing:
`helpers.measure.phases` times its phases from outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from helpers.method.compiler import CallCompiler
from helpers.method.drafters import Drafter
from helpers.method.kernels import RUNTIMES
from helpers.method.predictor import CodePredictor
from helpers.method.runtime_step import RuntimeStep
from helpers.method.round import ARFrame, ARStep, Prefill, Round, RoundLoop, SpeculativeFrame
from helpers.method.sampler import SamplerConfig
from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree, TreeIndex
from helpers.method.views import ViewStep


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


def step_type(predictor: CodePredictor, views: bool | None = None) -> type:
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


class Decoder:
    """Decode frames: the AR loop (drafter, tree None) or speculative decoding with `drafter` over `tree`.

    sampler: the talker's sampling settings; compile, rounds_per_graph: see the module docstring; torch_backend:
    torch.compile's backend (tests: "aot_eager"); core: a `FusedCore` of `predictor` to share; views: the eager host
    loop's call (default None: `ViewStep` on a CPU). Buffers (`buffers`: caches k, v, uniforms u, codes) are the
    decoder's own, made per batch size: a captured graph reads and writes them in place (batch 1 only)."""

    def __init__(self, predictor: CodePredictor, sampler: SamplerConfig, drafter: Drafter | None = None,
                 tree: SparseTree | None = None, compile: str = "none", rounds_per_graph: tuple[int, int] | None = None,
                 torch_backend: str | None = None, core: FusedCore | None = None, views: bool | None = None):
        n = predictor.num_codes
        self.predictor, self.sampler, self.drafter, self.tree = predictor, sampler, drafter, tree
        self.compile, self.rounds_per_graph, self.n = compile, rounds_per_graph, n
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self._check(predictor, drafter, tree, rounds_per_graph)
        host_loop = compile == "none" and rounds_per_graph is None
        self.batched = host_loop and tree is None and predictor.kernel not in RUNTIMES   # eager AR: any batch at once
        step = step_type(predictor, views) if host_loop else FusedStep
        if step is FusedStep and predictor.kernel != "dense":
            raise ValueError(f"compiled decoders take a predictor with kernel 'dense' (their calls gather rows by "
                             f"index), this one has {predictor.kernel!r}: pass predictor.with_kernel('dense')")
        self.core = decoder_core(predictor, core)
        self.states: dict[int, list[torch.Tensor]] = {}
        self.indices: dict[SparseTree, TreeIndex] = {}
        self.ts = [torch.full((1,), t, device=predictor.device) for t in range(n)]        # root positions [t]
        buffers = self.buffers(1)
        kernels, capture = self.compiler.kernels, self.compiler.capture
        if tree is None:
            prefill, ar = Prefill(self.core, sampler), ARStep.build(self.core, sampler, step)
            self.step = ar.step
            self.frame = (ARFrame(self.compiler(prefill, buffers), self.compiler(ar, buffers), n, predictor.device)
                          if rounds_per_graph is None else
                          capture(ARFrame(kernels(prefill), kernels(ar), n, predictor.device), buffers))
            return
        self.round = Round.build(self.core, drafter, tree, sampler, step)
        self.step = self.round.step
        prefill = Prefill(self.core, sampler, self.round.drafts, self.round.index)
        if rounds_per_graph is None:
            self.prefill, self.call = self.compiler(prefill, buffers), self.compiler(self.round, buffers)
            return
        first, then = rounds_per_graph
        self.status = [torch.zeros(1, tree.size + 1, dtype=torch.long, device=predictor.device),   # query, t, rounds
                       torch.ones(1, dtype=torch.long, device=predictor.device),
                       torch.zeros(1, dtype=torch.long, device=predictor.device)]
        round = kernels(self.round)                                     # compiled once, called by both loops
        self.open = capture(SpeculativeFrame(kernels(prefill), RoundLoop(round, first, n)), self.status + buffers)
        self.more = capture(RoundLoop(round, then, n), self.status + buffers)

    @staticmethod
    def _check(predictor: CodePredictor, drafter, tree, rounds_per_graph) -> None:
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

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    def reload(self) -> None:
        """Lay the official weights out again (after training or loading them, or moving the model): the decoder's
        calls read the new ones from the next frame on."""
        self.core.refresh()

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
        """The frame itself, on inputs `check` has passed."""
        k, v, uniforms, codes = buffers = self.buffers(g.shape[0])
        uniforms.copy_(u.reshape(uniforms.shape))
        n, calls, reads, accepted, drafts = self.n, self.n, 0, [], []
        if self.tree is None:
            self.frame(g, c0, *buffers)
        elif self.rounds_per_graph is None:
            query, cand = self.prefill(g, c0, *buffers)                                  # [1, N + 1], [D, m]
            t, calls = 1, 1
            while t < n:
                if self.compile == "none" and t < n - 1:                  # the depths this round may accept
                    depth = min(self.round.index.depth_max, n - 1 - t)
                    drafts.append((t, cand[:depth, :max(self.tree.width[:depth])]))
                query, t_new, cand = self.call(query, k, v, self.ts[t], uniforms, codes)
                t_next = int(t_new) if t < n - 1 else n            # the one host read per round; c14's ends the frame
                reads += t < n - 1
                accepted.append(t_next - t - 1)
                t, calls = t_next, calls + 1
        else:
            rounds, t = divmod(int(self.open(g, c0, *self.status, *buffers)), n + 1)   # one host read per graph
            reads = 1
            while t < n:
                rounds, t = divmod(int(self.more(*self.status, *buffers)), n + 1)
                reads += 1
            calls = 1 + rounds
        return FrameResult(codes[..., :n].clone().view(g.shape[0], n), calls, accepted, drafts, reads)


def frame_decoders(predictor: CodePredictor, drafter: Drafter, trees: dict, sampler: SamplerConfig
                   ) -> tuple[Decoder, dict]:
    """The eager decoders a comparison runs side by side, all over one fused core (one weight copy): the AR decoder
    and a speculative one per tree. trees {N: SparseTree} -> (ar, {N: decoder})."""
    core = decoder_core(predictor)
    return Decoder(predictor, sampler, core=core), {n: Decoder(predictor, sampler, drafter, tree, core=core)
                                                    for n, tree in trees.items()}
