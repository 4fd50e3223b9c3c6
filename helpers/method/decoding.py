"""Decoding one frame's residual codes c1..c15 from (g, c0): autoregressive and speculative.

Both decoders sample code position t with the frame's uniform u_t through the shared sampler, so for
the same uniforms they return the same codes (DESIGN.md section 2); only the number of calls differs.
Both run the fused call of `helpers.method.fused` (the AR loop at q = 1, the speculative decoder at q = N + 1),
so a speed comparison between them compares the calls, not two implementations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from helpers.method.predictor import CodePredictor, KVCache
from helpers.method.drafters import Drafter
from helpers.method.fused import FusedStep, fusable, make_plans, shared_core
from helpers.method.clock import no_clock
from helpers.method.sampling import SamplerConfig, sample, target_probs
from helpers.method.tree import SparseTree


@dataclass
class FrameResult:
    """codes [B, 15] (c1..c15); calls = model calls for the frame; accepted = drafts accepted per round.

    `drafts`: (t, candidates [D, m]) per round with a tree, the table its nodes were picked from (kept as the
    decoder's raw outputs, sliced when read)."""

    codes: torch.Tensor
    calls: int
    accepted: list[int] = field(default_factory=list)
    draft_sources: list[tuple] = field(default_factory=list, repr=False)   # (t, table, stop node or None, D, m)

    @property
    def tokens_per_step(self) -> float:
        return self.codes.shape[-1] / self.calls

    @property
    def drafts(self) -> list[tuple[int, torch.Tensor]]:
        return [(t, (table if node is None else table[0, node])[:depth, :width])
                for t, table, node, depth, width in self.draft_sources]


def _check_frame_inputs(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> None:
    if g.dim() != 2 or c0.dim() != 1 or g.shape[0] != c0.shape[0]:
        raise ValueError(f"expected g [B, H] and c0 [B], got {tuple(g.shape)} and {tuple(c0.shape)}")
    if tuple(u.shape) != (g.shape[0], predictor.num_codes):
        raise ValueError(f"expected uniforms [B={g.shape[0]}, {predictor.num_codes}], got {tuple(u.shape)}")
    predictor.check_codes(c0[:, None], first_pos=0)


def check_tree(predictor: CodePredictor, drafter: Drafter, tree: SparseTree) -> None:
    """A clear error for a tree deeper than the drafter's K or longer than the predictor's query."""
    if tree.max_depth > drafter.depth:
        raise ValueError(f"tree depth {tree.max_depth} exceeds the drafter's K={drafter.depth}; "
                         f"allowed tree depth: 1..{drafter.depth}")
    if tree.size + 1 > predictor.max_query:
        raise ValueError(f"tree of {tree.size} nodes needs a query of {tree.size + 1} tokens; "
                         f"the predictor allows max_query={predictor.max_query}")


def ar_step(predictor: CodePredictor) -> FusedStep:
    """The AR call (fused module at q = 1) on `predictor`'s shared core (`shared_core`), built once per core and
    kept on the predictor (it lives as long as the predictor, no longer); the core refreshes if weights change."""
    core = shared_core(predictor, max_depth=0)
    step = predictor.__dict__.get("_ar_step")
    if step is None or step.core is not core:
        step = FusedStep(core, None)
        object.__setattr__(predictor, "_ar_step", step)        # a plain attribute: not a registered submodule
    return step


@torch.no_grad()
def decode_frame_ar(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig,
                    u: torch.Tensor, clock=no_clock) -> FrameResult:
    """Autoregressive c1..c15: prefill [g, c0], then one call per code. g [B, H], c0 [B], u [B, 15].

    clock: a `helpers.measure.profile.PhaseClock` to tell where each phase of the frame ends (profiling)."""
    _check_frame_inputs(predictor, g, c0, u)
    step = ar_step(predictor)
    core = step.core
    cache = predictor.new_cache(g.shape[0])
    logits, k, v, _ = core.prefill(g, c0, cache.k, cache.v)
    cache.commit(k, v)
    codes = [sample(target_probs(logits, sampler), u[:, 0])]
    clock("prefill")
    for t in range(1, predictor.num_codes):
        logits, k, v = step.call_at(codes[-1][:, None], cache.k, cache.v, t, clock)
        clock("heads")
        if t + 1 < predictor.num_codes:
            cache.commit(k, v)
        clock("commit")
        codes.append(sample(target_probs(logits[:, 0], sampler), u[:, t]))
        clock("sample")
    return FrameResult(torch.stack(codes, dim=1), calls=predictor.num_codes)


class SpeculativeDecoder:
    """Draft with `drafter`, verify the whole `tree` in one fused call per round, walk it with the shared sampler.

    The fused call also returns the next round's drafts from every node (for the built-in drafters;
    others draft on the host from the stop node's hidden state, r before the final norm for a `prenorm` drafter),
    so a round on the host is: pick the
    stop node's drafts, one call, sample every token at once, walk, commit the accepted path's KV.
    """

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig):
        check_tree(predictor, drafter, tree)
        self.predictor, self.drafter, self.tree, self.sampler = predictor, drafter, tree, sampler
        self.core = shared_core(predictor, max_depth=max(tree.max_depth, 1))
        self.plans = make_plans(self.core, tree, drafter, prenorm=drafter.prenorm)    # h, or r for prenorm drafters
        self.fused_drafts = fusable(drafter)
        self._cache: KVCache | None = None

    @property
    def step(self) -> FusedStep:
        """The fused call for the whole tree (what a device runs every round; exported by coreml_export)."""
        return self.plans[1].step

    def _frame_cache(self) -> KVCache:
        p = self.predictor
        cache = self._cache
        if cache is None or cache.k.dtype != p.dtype or cache.k.device != p.device:
            cache = self._cache = p.new_cache(1)
        cache.length = 0                      # stale entries stay finite and are masked until overwritten
        return cache

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, clock=no_clock) -> FrameResult:
        """Speculative c1..c15 for one frame. g [1, H], c0 [1], u [1, 15] -> FrameResult.

        clock: a `helpers.measure.profile.PhaseClock` to tell where each phase of a round ends (profiling)."""
        p, n = self.predictor, self.predictor.num_codes
        _check_frame_inputs(p, g, c0, u)
        if g.shape[0] != 1:
            raise ValueError(f"the speculative decoder decodes one stream at a time, got batch {g.shape[0]}")
        self.core.refresh()
        cache = self._frame_cache()
        ck, cv = cache.k, cache.v
        u = u[0]
        logits, k, v, h = self.core.prefill(g, c0, ck, cv, prenorm=self.drafter.prenorm)   # h_1 (r_1: prenorm)
        ck[:, :, :, :2] = k
        cv[:, :, :, :2] = v
        length = 2
        root = sample(target_probs(logits, self.sampler), u[:1])                      # c_1, [1]
        codes = root.tolist()
        calls, accepted, sources = 1, [], []
        table, node = None, None         # the drafts [D, m] (or every node's, [1, q, D, m], and the stop node)
        if self.fused_drafts:            # round 1's drafts from h_1; later rounds' come out of the call
            table = self.plans[1].step.first_drafts(h)[0]
        clock("prefill")
        t = 1
        while t < n:
            plan = self.plans[t]
            if plan.tree is None:
                query = root[None]
            else:
                if not self.fused_drafts:
                    table = self.drafter.draft_logits(h, t, plan.draft_depth)[0].topk(plan.draft_width, dim=-1).indices
                sources.append((t, table, node, plan.draft_depth, plan.draft_width))
                cand = table if node is None else table[0, node]                              # [D, m]
                query = torch.cat((root, cand[plan.node_depth, plan.node_rank]))[None]
            clock("query")
            out = plan.step.call_at(query, ck, cv, t, clock)
            clock("heads")
            calls += 1
            ys_t = sample(target_probs(out[0][0], self.sampler), u.index_select(0, plan.u_index))   # [q]
            clock("sample")
            node, path, taken = plan.walk(ys_t.tolist(), query[0].tolist())
            clock("walk")
            codes += taken
            accepted.append(len(taken) - 1)
            t = plan.out_pos[node]
            if t < n:                                                # commit the root and the accepted path
                m = len(taken)
                if plan.prefix[node]:
                    ck[:, :, :, length:length + m] = out[1][:, :, :, :m]
                    cv[:, :, :, length:length + m] = out[2][:, :, :, :m]
                else:
                    ck[:, :, :, length:length + m] = out[1].index_select(3, path)
                    cv[:, :, :, length:length + m] = out[2].index_select(3, path)
                length += m
                root = ys_t[node:node + 1]
                if plan.tree is not None:
                    if self.fused_drafts:
                        table = out[3]                                   # [1, q, D, m]: the stop node's row next
                    else:
                        h, node = out[3][:, node], None
            clock("commit")
        return FrameResult(torch.tensor([codes], device=p.device), calls, accepted, sources)
