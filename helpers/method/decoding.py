"""Decoding one frame's residual codes c1..c15 from (g, c0): autoregressive and speculative.

Every decoder samples code position t with the frame's uniform u_t through the shared sampler, so for the same
uniforms they return the same codes; only the number of calls differs. All run the modules of
`helpers.method.round` over the verify call of `helpers.method.stack` (the AR loop at q = 1, the speculative rounds
at q = N + 1), so a speed comparison between them compares the calls, not two implementations.

- `ARDecoder`: the reference AR loop (`ARFrame`, eager, any kernel, any batch); `decode_frame_ar` runs a fresh one.
- `SpeculativeDecoder`: a prefill, then one `Round` per round; `compile` runs the very same modules eagerly
  ("none"), compiled by inductor, or captured as CUDA graphs (`helpers.method.compiler`). The host reads one integer
  a round (the next root position, to pick the next pruned tree's module). `CompiledSpeculative`: compiled by default.
- `CompiledAR`: the same AR loop compiled or captured, which reads nothing until the frame ends.
- `FrameSpeculative`: the host out of the loop: full-tree rounds, k per captured graph (`RoundLoop`), one host read
  for a frame of at most k1 rounds.

The eager decoders on a CPU call `helpers.method.views.ViewStep` (rows as views at a host int, any kernel; `views`),
everywhere else the gathered `FusedStep`. The decoders time nothing: `helpers.measure.phases` times their phases
from outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from helpers.method.compiler import CallCompiler
from helpers.method.drafters import Drafter
from helpers.method.predictor import CodePredictor
from helpers.method.round import ARFrame, ARStep, Prefill, Round, RoundLoop, SpeculativeFrame
from helpers.method.sampler import SamplerConfig
from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree
from helpers.method.views import ViewStep


@dataclass
class FrameResult:
    """codes [B, 15] (c1..c15); calls = model calls for the frame; accepted = drafts accepted per round;
    drafts: (t, candidates [D, m]) of each tree round, the table its nodes were picked from (eager decoders);
    reads: the decoder's host reads of device values in the frame (a device sync each), where it counts them."""

    codes: torch.Tensor
    calls: int
    accepted: list[int] = field(default_factory=list)
    drafts: list[tuple[int, torch.Tensor]] = field(default_factory=list, repr=False)
    reads: int | None = None

    @property
    def tokens_per_step(self) -> float:
        return self.codes.shape[-1] / self.calls


def _check_frame_inputs(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> None:
    if g.dim() != 2 or c0.dim() != 1 or g.shape[0] != c0.shape[0]:
        raise ValueError(f"expected g [B, H] and c0 [B], got {tuple(g.shape)} and {tuple(c0.shape)}")
    if tuple(u.shape) != (g.shape[0], predictor.num_codes):
        raise ValueError(f"expected uniforms [B={g.shape[0]}, {predictor.num_codes}], got {tuple(u.shape)}")
    predictor.check_codes(c0[:, None], first_pos=0)


def step_type(predictor: CodePredictor, views: bool | None) -> type:
    """The verify call's class: `ViewStep` (views True; default None: on a CPU) or the gathered `FusedStep`."""
    return ViewStep if (predictor.device.type == "cpu" if views is None else views) else FusedStep


def check_tree(predictor: CodePredictor, drafter: Drafter, tree: SparseTree) -> None:
    """A clear error for a tree deeper than the drafter's K or longer than the predictor's query."""
    if tree.max_depth > drafter.depth:
        raise ValueError(f"tree depth {tree.max_depth} exceeds the drafter's K={drafter.depth}; "
                         f"allowed tree depth: 1..{drafter.depth}")
    if tree.size + 1 > predictor.max_query:
        raise ValueError(f"tree of {tree.size} nodes needs a query of {tree.size + 1} tokens; "
                         f"the predictor allows max_query={predictor.max_query}")


def decoder_core(predictor: CodePredictor, max_depth: int, core: FusedCore | None = None) -> FusedCore:
    """A decoder's fused core: `core` where one is given (weight copies shared with other decoders of `predictor`;
    its max_depth must cover the decoder's trees), refreshed (the model may have moved since its last frame); else
    the predictor's own stack (`CodePredictor.stack`: one copy of the weights for its calls and all its dense
    decoders), or for a deployment kernel a new core of `max_depth`."""
    if core is None:
        return predictor.stack if predictor.kernel == "dense" else FusedCore(predictor, max_depth=max_depth)
    if core.predictor is not predictor:
        raise ValueError("the shared core belongs to another predictor; a decoder's core is its predictor's")
    if core.max_depth < max_depth:
        raise ValueError(f"the shared core has max_depth={core.max_depth}, the decoder needs {max_depth}")
    core.refresh()
    return core


class ARDecoder:
    """The reference AR loop, eager, any kernel, any batch: the one AR loop (`ARFrame`: prefill [g, c0], then one AR
    call, the fused module at q = 1, per code) run on fresh buffers of the frames' batch.

    Build it once and call `decode_frame` per frame: the loop's modules are built once per sampler, over a core
    (weight copies, `FusedCore`): `core` where one is given, else `decoder_core`'s (for a dense predictor its own
    stack). The core refreshes at every frame if the official weights changed. views: the step's class (`step_type`)."""

    def __init__(self, predictor: CodePredictor, core: FusedCore | None = None, views: bool | None = None):
        self.predictor = predictor
        self.core = decoder_core(predictor, 0, core)
        self.step = step_type(predictor, views)(self.core, None)
        self.frames: dict[SamplerConfig, ARFrame] = {}

    def frame(self, sampler: SamplerConfig) -> ARFrame:
        """The AR loop of `sampler` over this decoder's core and AR call (built on first use)."""
        if sampler not in self.frames:
            p = self.predictor
            self.frames[sampler] = ARFrame(Prefill(self.core, sampler), ARStep(self.step, sampler), p.num_codes,
                                           p.device)
        return self.frames[sampler]

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig, u: torch.Tensor) -> FrameResult:
        """c1..c15 of a batch of frames, one call per code. g [B, H], c0 [B], u [B, 15]."""
        p = self.predictor
        _check_frame_inputs(p, g, c0, u)
        self.core.refresh()
        k, v = self.core.empty_cache(g.shape[0])
        codes = torch.zeros(g.shape[0], p.num_codes + 1, dtype=torch.long, device=k.device)
        self.frame(sampler)(g, c0, k, v, u, codes)
        return FrameResult(codes[:, :p.num_codes], calls=p.num_codes, reads=0)


def decode_frame_ar(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig,
                    u: torch.Tensor) -> FrameResult:
    """Autoregressive c1..c15 by a new `ARDecoder(predictor)` (its modules built per call: a loop over frames builds
    one `ARDecoder` and calls its `decode_frame`). g [B, H], c0 [B], u [B, 15]."""
    return ARDecoder(predictor).decode_frame(g, c0, sampler, u)


class FrameState:
    """A decoder's buffers, passed to its modules by identity: KV caches k, v [L, 1, kv, S, d], the frame's uniforms
    u [15] (float64) and codes [15 + 1] (long: c1..c15 and a spare slot a round writes what it discards into), on
    the model's device; the root position inputs ts[t] = [t]."""

    def __init__(self, predictor: CodePredictor):
        cache = predictor.new_cache(1)
        self.k, self.v = cache.k, cache.v
        device, n = predictor.device, predictor.num_codes
        self.u = torch.zeros(n, dtype=torch.float64, device=device)
        self.codes = torch.zeros(n + 1, dtype=torch.long, device=device)
        self.ts = [torch.tensor([t], device=device) for t in range(n + 1)]

    @property
    def buffers(self) -> list[torch.Tensor]:
        return [self.k, self.v, self.u, self.codes]

    def start(self, predictor: CodePredictor, g, c0, u) -> None:
        _check_frame_inputs(predictor, g, c0, u)
        if g.shape[0] != 1:
            raise ValueError(f"the speculative and compiled decoders decode one stream at a time, got batch "
                             f"{g.shape[0]}")
        self.u.copy_(u[0])


def dense_only(predictor: CodePredictor) -> None:
    """Compiled calls gather their rows by index (and inductor lays weights out itself): the dense layout only."""
    if predictor.kernel != "dense":
        raise ValueError(f"compiled decoders take a predictor with kernel 'dense' (the compiler lays its weights out), "
                         f"this one has {predictor.kernel!r}: pass predictor.with_kernel('dense')")


class SpeculativeDecoder:
    """Draft with `drafter`, verify the whole `tree` in one call per round, walk it with the shared sampler.

    decode_frame(g [1, H], c0 [1], u [1, 15]) -> FrameResult: the AR codes for the same uniforms. One `Round` per
    distinct pruned tree (the tree pruned at depth 14 - t for a root at c_t; the plain `ARStep` at t = 14).
    compile: "none" (eager: any kernel), "inductor" or "cuda_graph" (kernel 'dense'); torch_backend: torch.compile's
    backend (tests: "aot_eager"). core: a `FusedCore` of `predictor` to share (weight copies) with its other
    decoders; default: `decoder_core`'s (for a dense predictor its own stack). views: eager only, the step's class
    (`step_type`)."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                 compile: str = "none", torch_backend: str | None = None, core: FusedCore | None = None,
                 views: bool | None = None):
        check_tree(predictor, drafter, tree)
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        if compile != "none":
            dense_only(predictor)
        step = step_type(predictor, views) if compile == "none" else FusedStep
        self.predictor, self.drafter, self.tree, self.sampler, self.compile = predictor, drafter, tree, sampler, compile
        depth = max(tree.max_depth, 1)
        self.core = decoder_core(predictor, depth, core)
        self.state = FrameState(predictor)
        n, buffers = predictor.num_codes, self.state.buffers
        built: dict[SparseTree | None, tuple] = {}
        self.rounds, self.calls, self.q = {}, {}, {}       # per root t: the module (Round / ARStep), its call, q
        for t in range(1, n):
            sub = tree.pruned(n - 1 - t)
            if sub not in built:
                if sub is None:
                    module = ARStep.build(self.core, sampler, step)
                else:
                    module = Round.build(self.core, drafter, sub, sampler, step)
                built[sub] = (module, self.compiler(module, buffers))
            self.rounds[t], self.calls[t] = built[sub]
            self.q[t] = 1 if sub is None else sub.size + 1
        first = self.rounds[1]
        self.prefill = self.compiler(Prefill(self.core, sampler, first.drafts, first.index), buffers)

    @property
    def step(self) -> FusedStep:
        """The verify call for the whole tree (what a device runs every round)."""
        return self.rounds[1].step

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        """Speculative c1..c15 for one frame. g [1, H], c0 [1], u [1, 15] -> FrameResult."""
        p, s, n = self.predictor, self.state, self.predictor.num_codes
        self.core.refresh()
        s.start(p, g, c0, u)
        eager = self.compile == "none"
        query, cand = self.prefill(g, c0, s.k, s.v, s.u, s.codes)                           # [1, q(t = 1)], [D, m]
        t, calls, reads, accepted, drafts = 1, 1, 0, [], []
        while t < n:
            q = query[:, :self.q[t]]
            if self.q[t] > 1:
                if eager:
                    index = self.rounds[t].index
                    drafts.append((t, cand[:index.depth_max, :index.width]))
                query, t_new, cand = self.calls[t](q, s.k, s.v, s.ts[t], s.u, s.codes)
                t_next = int(t_new)                                              # the one host read per round
                reads += 1
            else:
                query = self.calls[t](q, s.k, s.v, s.ts[t], s.u, s.codes)
                t_next = t + 1
            accepted.append(t_next - t - 1)
            t, calls = t_next, calls + 1
        return FrameResult(s.codes[:n].clone()[None], calls, accepted, drafts, reads=reads)


def frame_decoders(predictor: CodePredictor, drafter: Drafter, trees: dict, sampler: SamplerConfig
                   ) -> tuple[ARDecoder, dict]:
    """The eager decoders a comparison runs side by side, all over one fused core (one weight copy): an `ARDecoder`
    and a `SpeculativeDecoder` per tree. trees {N: SparseTree} -> (ar, {N: decoder})."""
    core = decoder_core(predictor, max([1] + [tree.max_depth for tree in trees.values()]))
    return ARDecoder(predictor, core), {n: SpeculativeDecoder(predictor, drafter, tree, sampler, core=core)
                                        for n, tree in trees.items()}


class CompiledSpeculative(SpeculativeDecoder):
    """`SpeculativeDecoder` compiled by inductor unless told otherwise."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                 compile: str = "inductor", torch_backend: str | None = None):
        super().__init__(predictor, drafter, tree, sampler, compile, torch_backend)


class CompiledAR:
    """The AR loop over the round's modules: decode_frame(g [1, H], c0 [1], u [1, 15]) -> FrameResult (15 calls).

    frame True (default): the whole frame is one module (`ARFrame`: one graph, one host call a frame, the step
    compiled once); False: the same `ARFrame` loop run from the host over the compiled `Prefill` and `ARStep`
    (`prefill`, `step`: 15 host calls a frame). The host
    reads nothing until the frame ends. compile: "none" | "inductor" | "cuda_graph"; compile_seconds: time of the
    first calls (compile / capture)."""

    def __init__(self, predictor: CodePredictor, sampler: SamplerConfig, compile: str = "inductor",
                 torch_backend: str | None = None, frame: bool = True):
        self.predictor, self.sampler = predictor, sampler
        dense_only(predictor)
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = decoder_core(predictor, 0)
        self.state = FrameState(predictor)
        buffers = self.state.buffers
        prefill, step = Prefill(self.core, sampler), ARStep.build(self.core, sampler)
        if frame:                                   # the step compiled once, the frame's loop over it captured
            kernels = self.compiler.kernels
            self.call = self.compiler.capture(ARFrame(kernels(prefill), kernels(step), predictor.num_codes,
                                                      predictor.device), buffers)
        else:                                       # the same loop run from the host over the compiled modules
            self.prefill, self.step = self.compiler(prefill, buffers), self.compiler(step, buffers)
            self.call = ARFrame(self.prefill, self.step, predictor.num_codes, predictor.device)

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        p, s = self.predictor, self.state
        self.core.refresh()
        s.start(p, g, c0, u)
        self.call(g, c0, s.k, s.v, s.u, s.codes)
        return FrameResult(s.codes[:p.num_codes].clone()[None], calls=p.num_codes, reads=0)


def first_rounds(tokens_per_step: float, num_codes: int = 15) -> int:
    """Rounds of the first graph for a decoder of this (measured or expected) tokens/step: the rounds an average
    frame needs, 15 / tokens_per_step - 1 (the prefill is a call), rounded up."""
    if not tokens_per_step >= 1.0:
        raise ValueError(f"tokens/step must be at least 1, got {tokens_per_step!r}")
    return max(1, min(num_codes - 1, math.ceil(num_codes / tokens_per_step - 1 - 1e-9)))


class FrameSpeculative:
    """The speculative decoder with the host out of the loop: decode_frame(g [1, H], c0 [1], u [1, 15]) ->
    FrameResult (the AR codes for the same uniforms; `reads`: host reads of the frame).

    first: rounds in the first graph (with the prefill); then: rounds in each further graph. compile: "none",
    "inductor" (the round compiled once, the loops run from the host), "cuda_graph" or "inductor_graph" (each loop
    one CUDA graph over the eager, or inductor's, round). Kernel 'dense'; the gathered `FusedStep`."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                 compile: str = "cuda_graph", first: int = 6, then: int = 1, torch_backend: str | None = None):
        check_tree(predictor, drafter, tree)
        if tree.size < 1:
            raise ValueError("a speculative frame needs a tree of at least one node")
        n = predictor.num_codes
        for name, value in (("first", first), ("then", then)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n - 1:
                raise ValueError(f"{name}={value!r} rounds per graph; allowed: an integer in 1..{n - 1}")
        dense_only(predictor)
        self.predictor, self.drafter, self.tree, self.sampler = predictor, drafter, tree, sampler
        self.compile, self.first, self.then = compile, first, then
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = decoder_core(predictor, max(tree.max_depth, 1))
        self.state = s = FrameState(predictor)
        device = predictor.device
        self.query = torch.zeros(1, tree.size + 1, dtype=torch.long, device=device)
        self.t = torch.ones(1, dtype=torch.long, device=device)
        self.rounds = torch.zeros(1, dtype=torch.long, device=device)
        buffers = [self.query, self.t, self.rounds] + s.buffers
        self.round = Round.build(self.core, drafter, tree, sampler)
        round = self.compiler.kernels(self.round)                       # compiled once, called by both loops
        prefill = self.compiler.kernels(Prefill(self.core, sampler, self.round.drafts, self.round.index))
        self.open = self.compiler.capture(SpeculativeFrame(prefill, RoundLoop(round, first, n)), buffers)
        self.more = self.compiler.capture(RoundLoop(round, then, n), buffers)

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        p, s, n = self.predictor, self.state, self.predictor.num_codes
        self.core.refresh()
        s.start(p, g, c0, u)
        t, rounds = self.open(g, c0, self.query, self.t, self.rounds, s.k, s.v, s.u, s.codes).tolist()
        reads = 1
        while t < n:
            t, rounds = self.more(self.query, self.t, self.rounds, s.k, s.v, s.u, s.codes).tolist()
            reads += 1
        return FrameResult(s.codes[:n].clone()[None], calls=1 + rounds, reads=reads)

