"""What any drafter could reach: the sharpness of the targets and the ideal drafter's acceptance.

A node accepts with probability equal to the target mass on its children's tokens, so acceptance is
capped by how confident the targets are (docs/method.md). Two measurements make that visible:

- `target_sharpness`: entropy and top probability of p_t (the sampler's distribution) per position;
- `ceiling_sums` (then `ceiling_mean`): the top-m mass of the exact marginal of c_{t+j} given h_t, i.e. the
  acceptance a[j][0..m-1] summed that the best possible deterministic drafter from h_t would reach. The marginal
  is computed by enumerating the most probable intermediate codes (a lower bound: the enumerated
  paths cover most, not all, of the mass).
"""

from __future__ import annotations

import torch

from helpers.method.predictor import CodePredictor
from helpers.method.stack import causal_mask
from helpers.method.sampler import SamplerConfig, target_probs


@torch.no_grad()
def target_sharpness(predictor: CodePredictor, h: torch.Tensor, sampler: SamplerConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean entropy (nats) and mean top probability of p_t per position. h [B, 15, H] -> ([15], [15])."""
    probs = target_probs(predictor.logits(h, range(1, predictor.num_codes + 1)), sampler).double()   # [B, 15, V]
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum(-1)
    return entropy.mean(0), probs.max(-1).values.mean(0)


@torch.no_grad()
def _marginals(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, t: int, depth: int, width: int,
               sampler: SamplerConfig, beam: int = 256) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Marginals of c_{t+1..t+depth} given [g, c0..c_{t-1}] (c_t ~ p_t and onwards), by enumerating the
    `width` most probable codes below every kept path and keeping the `beam` most probable paths.

    g [1, H_talker], codes [16] -> (marginals [V] per depth, the probability mass the paths cover per depth, 0-dim),
    on the predictor's device.
    """
    cache = predictor.new_cache(1)
    x = torch.cat((g[:, None].to(predictor.dtype), predictor.embed(codes[None, :t], range(t))), dim=1)
    hidden, k, v = predictor.forward_query(cache, x, causal_mask(t + 1, predictor.device))
    cache.commit(k, v)
    probs = target_probs(predictor.logits(hidden[:, -1:], [t])[:, 0], sampler).double()     # p_t [1, V]
    paths = torch.zeros(1, 0, dtype=torch.long, device=predictor.device)
    weights = torch.ones(1, dtype=torch.float64, device=predictor.device)
    marginals, covered = [], []
    for level in range(1, depth + 1):
        top = probs.topk(min(width, probs.shape[-1]), dim=-1)                       # children of every path
        w = (weights[:, None] * top.values).flatten()
        keep = w.topk(min(beam, w.numel())).indices
        parent = keep // top.indices.shape[1]
        paths = torch.cat((paths[parent], top.indices.flatten()[keep][:, None]), dim=1)
        weights = w[keep]
        batch = paths.shape[0]
        wide = type(cache)(cache.k.expand(-1, batch, -1, -1, -1), cache.v.expand(-1, batch, -1, -1, -1), cache.length)
        code_pos = list(range(t, t + level))
        hidden, _, _ = predictor.forward_query(wide, predictor.embed(paths, code_pos), causal_mask(level, predictor.device))
        probs = target_probs(predictor.logits(hidden[:, -1:], [t + level])[:, 0], sampler).double()   # [batch, V]
        marginals.append((weights[:, None] * probs).sum(0))
        covered.append(weights.sum())
    return marginals, covered


@torch.no_grad()
def ceiling_sums(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, sampler: SamplerConfig,
                 depth: int = 3, width: int = 16, m: int = 8, beam: int = 256) -> tuple[torch.Tensor, ...]:
    """The ideal deterministic drafter's acceptance, a lower bound, as sums over frames and t (so that frame blocks
    computed apart add up; `ceiling_mean` of the summed parts): top-m marginal mass [depth, m], entry [j-1, r] the
    marginal mass of the rank-r most probable code for c_{t+j} given h_t; covered mass [depth], the mass of the
    enumerated paths (how tight the bound is); count [depth].

    g [B, H_talker], codes [B, 16] (teacher-forced contexts); depth calls per (frame, t), batch <= beam.
    """
    total = torch.zeros(depth, m, dtype=torch.float64, device=predictor.device)
    mass = torch.zeros(depth, dtype=torch.float64, device=predictor.device)
    count = torch.zeros(depth, dtype=torch.float64, device=predictor.device)
    n = predictor.num_codes
    for b in range(g.shape[0]):
        for t in range(1, n):
            d = min(depth, n - t)
            marginals, covered = _marginals(predictor, g[b:b + 1], codes[b], t, d, width, sampler, beam)
            for j, (marginal, c) in enumerate(zip(marginals, covered)):
                total[j] += marginal.topk(m).values
                mass[j] += c
                count[j] += 1
    return total, mass, count


def ceiling_mean(total: torch.Tensor, mass: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(ceiling [depth, m], covered [depth]) on the CPU from `ceiling_sums` (or their sum over frame blocks): the
    means over frames and t (cumsum of a ceiling row over r: the top-m mass)."""
    count = count.clamp(min=1)
    return (total / count[:, None]).cpu(), (mass / count).cpu()


@torch.no_grad()
def ideal_drafts(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, sampler: SamplerConfig,
                 depth: int = 3, width: int = 16, beam: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """The ideal drafter's rank-0 draft: the most probable code of the (enumerated) exact marginal of c_{t+j}
    given h_t, per frame, start t and depth j.

    g [B, H_talker], codes [B, 16] -> drafts [B, 14, depth] (long; row t-1 = start t; -1 where t + j > 15) and the
    mass the enumeration covered [B, 14, depth] (float64, nan where t + j > 15), on the predictor's device.
    """
    n = predictor.num_codes
    drafts = torch.full((g.shape[0], n - 1, depth), -1, dtype=torch.long, device=predictor.device)
    covered = torch.full(drafts.shape, float("nan"), dtype=torch.float64, device=predictor.device)
    for b in range(g.shape[0]):
        for t in range(1, n):
            marginals, mass = _marginals(predictor, g[b:b + 1], codes[b], t, min(depth, n - t), width, sampler, beam)
            drafts[b, t - 1, :len(marginals)] = torch.stack([m.argmax() for m in marginals])
            covered[b, t - 1, :len(mass)] = torch.stack(mass)
    return drafts, covered
