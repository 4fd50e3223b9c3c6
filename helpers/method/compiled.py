"""Compiled calls: each call of a frame as one module that samples, walks and commits on the device.

The eager decoders (`helpers.method.decoding`) stay the reference. Here every call the decoders make is one
`nn.Module` whose forward does everything the host did between two calls, so it can be compiled as one graph
(`torch.compile` / inductor, CPU or CUDA) or captured as one CUDA graph; `t` is a [1] tensor input, so one graph
serves every root position:

- `PrefillCall(g [1, Ht], c0 [1], k, v, u [15], codes [15])` -> first query [1, q]: the prefill, KV slots 0, 1
  written in place, c1 sampled (u[0]) and written to codes[0], round 1's drafts from h_1 (speculative).
- `ARCall(token [1, 1], k, v, t [1], u, codes)` -> c_{t+1} [1, 1]: the q = 1 call, KV slot t + 1, codes[t].
- `RoundCall(query [1, q], k, v, t, u, codes)` -> (next query [1, q], t_new [1]): the verify call over one
  (pruned) tree, every query token sampled with its own uniform u[t + depth], the walk (a node is accepted when
  it and every ancestor equal their parent's sample; the stop node is the deepest accepted one), the accepted
  path's codes and KV written at fixed offsets t .. t + D with `index_copy_` (entries past the stop land in
  slots still masked and are overwritten later: no allocation, no data-dependent shape), and the next round's
  drafts computed from the stop node's hidden state only (`StopDrafts`; the eager fused call drafts from
  every node because its walk runs on the host after the call).

Caches k, v [L, 1, kv, S, d], the uniforms and the codes are the decoder's own buffers, passed by identity.
The host loop per round is one call and one `int(t_new)` (to pick the next pruned tree's graph); the AR loop
reads nothing until the frame ends. Pruned trees are prefixes of the full tree's query order, so a round's
next query serves the next plan as `query[:, :q]`.

`compile` modes (`COMPILE_MODES`): "none" (the same modules run eagerly), "inductor" (torch.compile, static
shapes, no graph breaks; C++ wrapper on CPU), "cuda_graph" (one CUDA graph per module, replayed from static
buffers; CUDA only). `torch_backend` overrides torch.compile's backend (tests: "aot_eager", no C++ build).
"""

from __future__ import annotations

import time

import torch
from torch import nn

from helpers.method.decoding import FrameResult, _check_frame_inputs, check_tree
from helpers.method.drafters import Drafter, MedusaHeads
from helpers.method.fused import FusedCore, FusedStep, fusable, make_plans
from helpers.method.predictor import CodePredictor
from helpers.method.sampling import SamplerConfig, sample, target_probs
from helpers.method.tree import SparseTree

COMPILE_MODES = ("none", "inductor", "cuda_graph")


def check_compile_mode(mode: str, device: torch.device) -> None:
    """A clear error for an unknown mode or CUDA graphs off CUDA."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={mode!r} is not allowed; allowed: {', '.join(COMPILE_MODES)}")
    if mode == "cuda_graph" and torch.device(device).type != "cuda":
        raise ValueError(f"compile='cuda_graph' needs a CUDA model, this one is on {device}; "
                         f"use 'inductor' or 'none' there")


def _sample(logits: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig) -> torch.Tensor:
    """The shared sampler: logits [..., V], u [...] -> tokens [...]."""
    return sample(target_probs(logits, sampler), u)


class StopDrafts(nn.Module):
    """Top-m drafts for depths 1..D from one hidden state, for the round rooted at t_new (what
    `FusedStep._heads` computes for that node, computed for the stop node only).

    forward(h [1, H], t_new [1]) -> [D, m]: reused heads / offsets H_{t_new+j-1}(h + b_j) (prenorm offsets: h is r,
    read as norm(r + b_j)); Medusa heads of start position t_new. Head rows past c15 are clamped as in the fused
    call (those drafts are pruned)."""

    def __init__(self, core: FusedCore, drafter: Drafter, depth: int, width: int):
        super().__init__()
        if not fusable(drafter):
            raise ValueError(f"compiled rounds draft with heads (+ offsets): drafter {type(drafter).__name__} "
                             f"drafts on the host; allowed: ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads")
        self.core, self.drafter, self.depth, self.width = core, drafter, depth, width
        self.medusa = isinstance(drafter, MedusaHeads)
        self.prenorm = drafter.prenorm
        self.register_buffer("steps", torch.arange(depth, device=core.heads.device), persistent=False)

    def forward(self, h: torch.Tensor, t_new: torch.Tensor) -> torch.Tensor:
        n = self.core.num_codes
        if self.medusa:
            w = self.drafter.heads.index_select(0, (t_new - 1).clamp(max=n - 1))[0, :self.depth]   # [D, V, H]
            logits = torch.matmul(h[None], w.transpose(-1, -2))                                  # [D, 1, V]
        else:
            w = self.core.heads.index_select(0, (t_new + self.steps).clamp(max=n - 1))           # [D, H, V]
            b = self.drafter.offsets
            x = h.expand(self.depth, -1) if b is None else h + b[:self.depth].detach().to(h.dtype)   # [D, H]
            if self.prenorm:
                x = self.core.final_norm(x)
            logits = torch.bmm(x[:, None], w)                                                    # [D, 1, V]
        return logits[:, 0].topk(self.width, dim=-1).indices                                     # [D, m]


class PrefillCall(nn.Module):
    """Prefill, commit slots 0-1, sample c1 (and round 1's query when `drafts` is given). See module docstring."""

    def __init__(self, core: FusedCore, sampler: SamplerConfig, drafts: StopDrafts | None = None,
                 tree: SparseTree | None = None):
        super().__init__()
        self.core, self.sampler, self.drafts = core, sampler, drafts
        dev = core.heads.device
        if drafts is not None:
            self.register_buffer("node_depth", (tree.depth[1:] - 1).to(dev), persistent=False)
            self.register_buffer("node_rank", tree.rank[1:].to(dev), persistent=False)
        self.register_buffer("one", torch.ones(1, dtype=torch.long, device=dev), persistent=False)

    def forward(self, g, c0, k, v, u, codes):
        prenorm = self.drafts is not None and self.drafts.prenorm
        logits, k_new, v_new, h1 = self.core.prefill(g, c0, k, v, prenorm)                 # h_1, or r_1 (prenorm)
        k[:, :, :, :2] = k_new
        v[:, :, :, :2] = v_new
        c1 = _sample(logits, u[:1], self.sampler)                                # [1]
        codes[:1] = c1
        if self.drafts is None:
            return c1[:, None]
        cand = self.drafts(h1, self.one)                                         # [D, m]
        return torch.cat((c1, cand[self.node_depth, self.node_rank]))[None]      # [1, q]


class ARCall(nn.Module):
    """The AR call at root position t: call, commit KV slot t + 1, sample c_{t+1} into codes[t]."""

    def __init__(self, step: FusedStep, sampler: SamplerConfig):
        super().__init__()
        step.use_views = False                                                   # the gather path (any t tensor)
        self.step, self.sampler = step, sampler

    def forward(self, token, k, v, t, u, codes):
        logits, k_new, v_new = self.step(token, k, v, t)[:3]
        k.index_copy_(3, t + 1, k_new)
        v.index_copy_(3, t + 1, v_new)
        c = _sample(logits[:, 0], u.index_select(0, t), self.sampler)             # [1]
        codes.index_copy_(0, t, c)
        return c[:, None]


class RoundCall(nn.Module):
    """One speculative round over one (pruned) tree: call, sample all, walk, commit, next query (no host)."""

    def __init__(self, step: FusedStep, drafts: StopDrafts, sampler: SamplerConfig):
        super().__init__()
        step.use_views = False
        self.step, self.drafts, self.sampler = step, drafts, sampler
        tree = step.tree
        depth, parents = tree.depth_list, tree.parent.tolist()
        D = max(depth)
        paths = []                                                  # root .. node, padded with the node to D + 1
        for i in range(len(depth)):
            chain = [i]
            while chain[-1] != 0:
                chain.append(parents[chain[-1]])
            paths.append(chain[::-1] + [i] * (D + 1 - len(chain)))
        dev = step.core.heads.device
        parent = tree.parent.clone()
        parent[0] = 0
        self.register_buffer("depth", tree.depth.to(dev), persistent=False)                 # [q]
        self.register_buffer("parent", parent.to(dev), persistent=False)                    # [q] (root: itself)
        self.register_buffer("is_root", torch.arange(len(depth), device=dev) == 0, persistent=False)
        self.register_buffer("ancestors", tree.mask.to(dev), persistent=False)              # [q, q] incl. self
        self.register_buffer("paths", torch.tensor(paths, device=dev), persistent=False)    # [q, D + 1]
        self.register_buffer("offsets", torch.arange(D + 1, device=dev), persistent=False)
        self.register_buffer("node_depth", (tree.depth[1:] - 1).to(dev), persistent=False)
        self.register_buffer("node_rank", tree.rank[1:].to(dev), persistent=False)

    def forward(self, query, k, v, t, u, codes):
        logits, k_new, v_new, hidden = self.step(query, k, v, t)                 # [1, q, V], .., [1, q, H]
        ys = _sample(logits[0], u.index_select(0, t + self.depth), self.sampler)  # [q]: sample of every token
        ok = (query[0] == ys.index_select(0, self.parent)) | self.is_root         # token == its parent's sample
        accepted = ~(self.ancestors & ~ok[None]).any(-1)                          # it and every ancestor matched
        stop = torch.argmax(accepted.long() * self.depth).reshape(1)             # deepest accepted (unique/depth)
        path = self.paths.index_select(0, stop)[0]                                # [D + 1]
        pos = t + self.offsets
        codes.index_copy_(0, pos, ys.index_select(0, path))                      # c_{t+1}.. (past the stop: stale)
        k.index_copy_(3, pos + 1, k_new.index_select(3, path))                   # root + accepted path
        v.index_copy_(3, pos + 1, v_new.index_select(3, path))
        t_new = t + self.depth.index_select(0, stop) + 1
        cand = self.drafts(hidden[0].index_select(0, stop), t_new)               # [D, m]
        return torch.cat((ys.index_select(0, stop), cand[self.node_depth, self.node_rank]))[None], t_new


class _Graphed:
    """A module replayed from one captured CUDA graph: arguments that are not the decoder's state buffers
    (`state`, passed by identity) are copied into the graph's static inputs; returns the static outputs."""

    def __init__(self, fn: nn.Module, args: tuple, state: list[torch.Tensor]):
        self.static = [a if any(a is s for s in state) else a.clone() for a in args]
        stream = torch.cuda.Stream(device=args[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                fn(*self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = fn(*self.static)

    def __call__(self, *args):
        for s, a in zip(self.static, args):
            if s is not a:
                s.copy_(a)
        self.graph.replay()
        return self.out


class CallCompiler:
    """Compiles the modules of one decoder in one mode; cuda_graph modules are captured at the first call."""

    def __init__(self, mode: str, device: torch.device, torch_backend: str | None = None):
        check_compile_mode(mode, device)
        self.mode, self.device, self.torch_backend = mode, torch.device(device), torch_backend
        self.seconds = 0.0                     # compile / capture time booked so far (first calls)
        if mode == "inductor":
            # every RoundCall shares one forward code object; dynamo's default limit (8) would fall back to eager
            dynamo = torch._dynamo.config
            dynamo.cache_size_limit = max(dynamo.cache_size_limit, 64)
            dynamo.accumulated_cache_size_limit = max(dynamo.accumulated_cache_size_limit, 512)

    def __call__(self, module: nn.Module, state: list[torch.Tensor]):
        if self.mode == "none":
            return module
        if self.mode == "inductor":
            backend = self.torch_backend or "inductor"
            options = {"cpp_wrapper": True} if backend == "inductor" and self.device.type == "cpu" else None
            compiled = torch.compile(module, backend=backend, dynamic=False, fullgraph=True, options=options)
            return self._timed_first(compiled)
        holder = {}

        def call(*args):
            if "graph" not in holder:
                start = time.perf_counter()
                holder["graph"] = _Graphed(module, args, state)
                self.seconds += time.perf_counter() - start
            return holder["graph"](*args)
        return call

    def _timed_first(self, fn):
        done = []

        def call(*args):
            if done:
                return fn(*args)
            start = time.perf_counter()
            out = fn(*args)
            self.seconds += time.perf_counter() - start
            done.append(True)
            return out
        return call


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
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = FusedCore(predictor, max_depth=0)
        self.state = _FrameState(predictor)
        buffers = self.state.buffers
        self.prefill = self.compiler(PrefillCall(self.core, sampler), buffers)
        self.call = self.compiler(ARCall(self.core.step(None), sampler), buffers)

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
