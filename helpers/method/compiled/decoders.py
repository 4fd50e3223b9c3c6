"""The host loops over the compiled calls: `CompiledAR` (15 calls a frame) and `CompiledSpeculative` (one call a
round, one host read of the next root position). See `helpers.method.compiled`."""

from __future__ import annotations

import torch

from helpers.method.compiled.calls import ARCall, PrefillCall, RoundCall, StopDrafts
from helpers.method.compiled.compiler import CallCompiler
from helpers.method.decoding import FrameResult, _check_frame_inputs, check_tree
from helpers.method.drafters import Drafter
from helpers.method.fused import FusedCore, FusedStep, make_plans
from helpers.method.predictor import CodePredictor
from helpers.method.sampling import SamplerConfig
from helpers.method.tree import SparseTree


def dense_only(predictor: CodePredictor) -> None:
    """The compiled calls gather their rows by index and lay weights out themselves (inductor's freezing packs
    them): they take the dense reference layout, not a kernel's."""
    if predictor.kernel != "dense":
        raise ValueError(f"compiled decoders take a predictor with kernel 'dense' (the compiler lays its weights out), "
                         f"this one has {predictor.kernel!r}: pass predictor.with_kernel('dense')")


class _FrameState:
    """The decoder's buffers: KV caches, the frame's uniforms [15] (model's device, float64), codes [15], t inputs."""

    def __init__(self, predictor: CodePredictor):
        cache = predictor.new_cache(1)
        self.k, self.v = cache.k, cache.v
        device, n = predictor.device, predictor.num_codes
        self.u = torch.zeros(n, dtype=torch.float64, device=device)
        self.codes = torch.zeros(n, dtype=torch.long, device=device)
        self.ts = [torch.tensor([t], device=device) for t in range(n + 1)]

    @property
    def buffers(self) -> list[torch.Tensor]:
        return [self.k, self.v, self.u, self.codes]

    def start(self, predictor: CodePredictor, g, c0, u) -> None:
        _check_frame_inputs(predictor, g, c0, u)
        if g.shape[0] != 1:
            raise ValueError(f"the compiled decoders decode one stream at a time, got batch {g.shape[0]}")
        self.u.copy_(u[0])


class CompiledAR:
    """The AR loop on compiled calls: decode_frame(g [1, H], c0 [1], u [1, 15]) -> FrameResult (15 calls).

    compile: "none" | "inductor" | "cuda_graph"; compile_seconds: time of the first calls (compile / capture)."""

    def __init__(self, predictor: CodePredictor, sampler: SamplerConfig, compile: str = "inductor",
                 torch_backend: str | None = None):
        self.predictor, self.sampler = predictor, sampler
        dense_only(predictor)
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = FusedCore(predictor, max_depth=0)
        self.state = _FrameState(predictor)
        buffers = self.state.buffers
        self.prefill = self.compiler(PrefillCall(self.core, sampler), buffers)
        self.call = self.compiler(ARCall(FusedStep(self.core, None), sampler), buffers)

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, clock=None) -> FrameResult:
        p, s = self.predictor, self.state
        self.core.refresh()
        s.start(p, g, c0, u)
        token = self.prefill(g, c0, s.k, s.v, s.u, s.codes)
        if clock is not None:
            clock("prefill")
        for t in range(1, p.num_codes):
            token = self.call(token, s.k, s.v, s.ts[t], s.u, s.codes)
            if clock is not None:
                clock("call")
        return FrameResult(s.codes.clone()[None], calls=p.num_codes)


class CompiledSpeculative:
    """The speculative loop on compiled rounds (one graph per distinct pruned tree, the AR call at t = 14).

    decode_frame(g [1, H], c0 [1], u [1, 15]) -> FrameResult (codes, calls, accepted per round); the codes are
    the AR codes for the same uniforms. Drafters: ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                 compile: str = "inductor", torch_backend: str | None = None):
        check_tree(predictor, drafter, tree)
        self.predictor, self.drafter, self.tree, self.sampler = predictor, drafter, tree, sampler
        dense_only(predictor)
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = FusedCore(predictor, max_depth=max(tree.max_depth, 1))
        # verify-only calls (their hidden output is r for a prenorm drafter); drafts from the stop node
        self.plans = make_plans(self.core, tree, None, prenorm=drafter.prenorm)
        self.state = _FrameState(predictor)
        buffers = self.state.buffers
        full = [(int(d), int(r)) for d, r in zip(tree.depth[1:], tree.rank[1:])]
        calls: dict[int, object] = {}
        self.calls, self.q, self.is_round = {}, {}, {}
        for t, plan in self.plans.items():
            key = id(plan.step)
            if key not in calls:
                if plan.tree is None:
                    module = ARCall(plan.step, sampler)
                else:
                    sub = [(int(d), int(r)) for d, r in zip(plan.tree.depth[1:], plan.tree.rank[1:])]
                    if full[:len(sub)] != sub:
                        raise ValueError("a pruned tree is not a prefix of the full tree's query order")
                    drafts = StopDrafts(self.core, drafter, plan.tree.max_depth, max(plan.tree.width))
                    module = RoundCall(plan.step, drafts, sampler)
                calls[key] = self.compiler(module, buffers)
            self.calls[t], self.q[t], self.is_round[t] = calls[key], plan.step.q, plan.tree is not None
        first = self.plans[1].tree
        drafts = StopDrafts(self.core, drafter, first.max_depth, max(first.width))
        self.prefill = self.compiler(PrefillCall(self.core, sampler, drafts, first), buffers)

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, clock=None) -> FrameResult:
        p, s, n = self.predictor, self.state, self.predictor.num_codes
        self.core.refresh()
        s.start(p, g, c0, u)
        query = self.prefill(g, c0, s.k, s.v, s.u, s.codes)                     # [1, q(t = 1)]
        if clock is not None:
            clock("prefill")
        t, calls, accepted = 1, 1, []
        while t < n:
            q = query[:, :self.q[t]]
            if self.is_round[t]:
                query, t_new = self.calls[t](q, s.k, s.v, s.ts[t], s.u, s.codes)
                t_next = int(t_new)                                             # the one host read per round
                accepted.append(t_next - t - 1)
            else:
                query = self.calls[t](q, s.k, s.v, s.ts[t], s.u, s.codes)
                t_next = t + 1
                accepted.append(0)
            if clock is not None:
                clock("call")
            t, calls = t_next, calls + 1
        return FrameResult(s.codes.clone()[None], calls, accepted)
