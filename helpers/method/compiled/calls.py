"""The compiled calls: each call of a frame as one module that samples, walks and commits on the device (see
`helpers.method.compiled`). `RoundCall` is the verification's walk written for the device (the host's is
`helpers.method.fused.plans.FusedPlan.walk`)."""

from __future__ import annotations

import torch
from torch import nn

from helpers.method.drafters import Drafter, MedusaHeads
from helpers.method.fused import FusedCore, FusedStep, fusable
from helpers.method.sampling import SamplerConfig, sample, target_probs
from helpers.method.tree import SparseTree


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
        depth = tree.depth_list
        D = max(depth)
        paths = [p + [p[-1]] * (D + 1 - len(p)) for p in tree.ancestor_paths]   # root .. node, padded with the node
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
