"""Decoding one frame's residual codes c1..c15 from (g, c0): autoregressive and speculative.

Both decoders sample code position t with the frame's uniform u_t through the shared sampler, so for
the same uniforms they return the same codes (DESIGN.md section 2); only the number of calls differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .code_predictor import CodePredictor, causal_mask
from .drafters import Drafter
from .sampling import SamplerConfig, sample, target_probs
from .tree import SparseTree


@dataclass
class FrameResult:
    """codes [B, 15] (c1..c15); calls = model calls for the frame; accepted = drafts accepted per round."""

    codes: torch.Tensor
    calls: int
    accepted: list[int] = field(default_factory=list)
    drafts: list[tuple[int, torch.Tensor]] = field(default_factory=list)   # (t, candidates [D, m]) per round

    @property
    def tokens_per_step(self) -> float:
        return self.codes.shape[-1] / self.calls


def _check_frame_inputs(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> None:
    if g.dim() != 2 or c0.dim() != 1 or g.shape[0] != c0.shape[0]:
        raise ValueError(f"expected g [B, H] and c0 [B], got {tuple(g.shape)} and {tuple(c0.shape)}")
    if tuple(u.shape) != (g.shape[0], predictor.num_codes):
        raise ValueError(f"expected uniforms [B={g.shape[0]}, {predictor.num_codes}], got {tuple(u.shape)}")
    predictor.check_codes(c0[:, None], first_pos=0)


@torch.no_grad()
def decode_frame_ar(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig,
                    u: torch.Tensor) -> FrameResult:
    """Autoregressive c1..c15: prefill [g, c0], then one call per code. g [B, H], c0 [B], u [B, 15]."""
    _check_frame_inputs(predictor, g, c0, u)
    cache = predictor.new_cache(g.shape[0])
    h = predictor.prefill(cache, g, c0)
    one = causal_mask(1, predictor.device)
    codes = []
    for t in range(1, predictor.num_codes + 1):
        probs = target_probs(predictor.logits(h[:, None], [t])[:, 0], sampler)
        codes.append(sample(probs, u[:, t - 1]))
        if t == predictor.num_codes:
            break
        hidden, k, v = predictor.run(cache, predictor.embed(codes[-1][:, None], [t]), one)
        cache.commit(k, v)
        h = hidden[:, 0]
    return FrameResult(torch.stack(codes, dim=1), calls=predictor.num_codes)


@dataclass
class _RoundPlan:
    """Per root code position t: the pruned tree and its query layout (computed once)."""

    tree: SparseTree | None
    code_pos: list[int]           # code position carried by each query token
    out_pos: list[int]            # code position each query token's output produces
    depth: torch.Tensor           # [q] tree depth (RoPE offset after the cache)
    mask: torch.Tensor            # [q, q] bool
    u_index: torch.Tensor         # [q] column of u used at each query token


class SpeculativeDecoder:
    """Draft with `drafter`, verify the whole `tree` in one call per round, walk it with the shared sampler."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig):
        if tree.max_depth > drafter.depth:
            raise ValueError(f"tree depth {tree.max_depth} exceeds the drafter's K={drafter.depth}; "
                             f"allowed tree depth: 1..{drafter.depth}")
        if tree.size + 1 > predictor.max_query:
            raise ValueError(f"tree of {tree.size} nodes needs a query of {tree.size + 1} tokens; "
                             f"the predictor allows max_query={predictor.max_query}")
        self.predictor, self.drafter, self.tree, self.sampler = predictor, drafter, tree, sampler
        n = predictor.num_codes
        self.plans = {t: self._plan(t) for t in range(1, n)}

    def _plan(self, t: int) -> _RoundPlan:
        # A node carrying c15 would gain nothing (the parent's output samples c15 anyway): prune at 14 - t.
        tree = self.tree.pruned(self.predictor.num_codes - 1 - t)
        depth = tree.depth_list if tree is not None else [0]
        mask = tree.mask if tree is not None else causal_mask(1)
        u_index = torch.tensor([t + d for d in depth], device=self.predictor.device)
        return _RoundPlan(tree, [t + d for d in depth], [t + d + 1 for d in depth],
                          torch.tensor(depth, device=self.predictor.device), mask.to(self.predictor.device), u_index)

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> FrameResult:
        """Speculative c1..c15 for one frame. g [1, H], c0 [1], u [1, 15] -> FrameResult."""
        p = self.predictor
        _check_frame_inputs(p, g, c0, u)
        if g.shape[0] != 1:
            raise ValueError(f"the speculative decoder decodes one stream at a time, got batch {g.shape[0]}")
        cache = p.new_cache(1)
        h = p.prefill(cache, g, c0)                                  # h_1 [1, H]
        probs = target_probs(p.logits(h[:, None], [1])[:, 0], self.sampler)
        codes = [int(sample(probs, u[:, 0]))]
        calls, accepted, drafts = 1, [], []
        t = 1                                                        # code position of the last sampled code
        while t < p.num_codes:
            plan = self.plans[t]
            if plan.tree is None:
                query = torch.tensor([[codes[-1]]], device=p.device)
                node_tokens: list[int] = []
            else:
                logits = self.drafter.draft_logits(h, t, plan.tree.max_depth)[0]          # [D, V]
                cand = logits.topk(max(plan.tree.width), dim=-1).indices                    # [D, m]
                drafts.append((t, cand))
                nodes = cand[plan.tree.depth[1:] - 1, plan.tree.rank[1:]]                  # [N]
                query = torch.cat((torch.tensor([codes[-1]], device=p.device), nodes))[None]
                node_tokens = nodes.tolist()
            hidden, k, v = p.run(cache, p.embed(query, plan.code_pos), plan.mask, plan.depth)
            calls += 1
            probs = target_probs(p.logits(hidden, plan.out_pos), self.sampler)              # [1, q, V]
            ys = sample(probs[0], u[0, plan.u_index]).tolist()
            node, path = 0, [0]
            while True:                                              # walk: descend while the sample matches
                y = ys[node]
                children = plan.tree.children[node] if plan.tree is not None else {}
                child = next((c for c in children.values() if node_tokens[c - 1] == y), None)
                if child is None:
                    break
                node = child
                path.append(child)
                codes.append(y)
            codes.append(y)
            accepted.append(len(path) - 1)
            t = plan.out_pos[node]
            if t < p.num_codes:
                cache.commit(k, v, keep=path)
                h = hidden[:, node]
        return FrameResult(torch.tensor([codes], device=p.device), calls, accepted, drafts)
