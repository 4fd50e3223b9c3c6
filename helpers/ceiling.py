"""What any drafter could reach: the sharpness of the targets and the ideal drafter's acceptance.

A node accepts with probability equal to the target mass on its children's tokens, so acceptance is
capped by how confident the targets are (DESIGN.md section 5). Two measurements make that visible:

- `target_sharpness`: entropy and top probability of p_t (the sampler's distribution) per position;
- `drafter_ceiling`: the top-m mass of the exact marginal of c_{t+j} given h_t, i.e. the acceptance
  a[j][0..m-1] summed that the best possible deterministic drafter from h_t would reach. The marginal
  is computed by enumerating the most probable intermediate codes (a lower bound: the enumerated
  paths cover most, not all, of the mass).
"""

from __future__ import annotations

import torch

from .code_predictor import CodePredictor
from .sampling import SamplerConfig, target_probs
from .tree import SparseTree


@torch.no_grad()
def target_sharpness(predictor: CodePredictor, h: torch.Tensor, sampler: SamplerConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean entropy (nats) and mean top probability of p_t per position. h [B, 15, H] -> ([15], [15])."""
    probs = target_probs(predictor.logits(h, range(1, predictor.num_codes + 1)), sampler).double()   # [B, 15, V]
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum(-1)
    return entropy.mean(0), probs.max(-1).values.mean(0)


@torch.no_grad()
def _marginals(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, t: int, depth: int, width: int,
               sampler: SamplerConfig) -> list[torch.Tensor]:
    """Marginals of c_{t+1..t+depth} given [g, c0..c_{t-1}] and c_t ~ p_t, by enumerating the top-`width`
    codes at every intermediate position. g [1, H_talker], codes [16] -> list of [V]."""
    cache = predictor.new_cache(1)
    x = torch.cat((g[:, None].to(predictor.dtype), predictor.embed(codes[None, :t], range(t))), dim=1)
    hidden, k, v = predictor.run(cache, x, torch.ones(t + 1, t + 1, dtype=torch.bool).tril())
    cache.commit(k, v)
    p_root = target_probs(predictor.logits(hidden[:, -1:], [t])[0, 0], sampler)        # p_t [V]
    paths: list[tuple[int, ...]] = []
    weights: dict[tuple[int, ...], float] = {}
    tokens: dict[tuple[int, ...], int] = {}
    top = p_root.topk(width)
    for r in range(width):                                        # level 1: the top codes for c_t
        paths.append((r,))
        weights[(r,)], tokens[(r,)] = float(top.values[r]), int(top.indices[r])
    out = []
    for level in range(1, depth + 1):
        tree = SparseTree(paths)
        order = [tuple(p) for p in tree.paths]
        query = torch.tensor([[tokens[p] for p in order]], device=predictor.device)
        code_pos = [t + len(p) - 1 for p in order]
        hidden, _, _ = predictor.run(cache, predictor.embed(query, code_pos), tree.mask[1:, 1:], tree.depth[1:] - 1)
        probs = target_probs(predictor.logits(hidden, [c + 1 for c in code_pos]), sampler)[0]   # [n, V]
        leaves = [i for i, p in enumerate(order) if len(p) == level]
        marginal = sum(weights[order[i]] * probs[i].double() for i in leaves)
        out.append(marginal)
        if level == depth:
            break
        for i in leaves:                                          # grow: the top codes below each leaf
            top = probs[i].topk(width)
            for r in range(width):
                child = order[i] + (r,)
                paths.append(child)
                weights[child] = weights[order[i]] * float(top.values[r])
                tokens[child] = int(top.indices[r])
    return out


@torch.no_grad()
def drafter_ceiling(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, sampler: SamplerConfig,
                    depth: int = 3, width: int = 4, m: int = 8) -> torch.Tensor:
    """Ideal deterministic drafter's acceptance: ceiling [depth, m], entry [j-1, r] = mean over frames and t of
    the marginal mass of the rank-r most probable code for c_{t+j} given h_t (cumsum over r = top-m mass).

    g [B, H_talker], codes [B, 16] (teacher-forced contexts). Cost: depth calls of up to width^depth nodes
    per (frame, t); keep width^depth + width^(depth-1) + ... <= predictor.max_query - 1.
    """
    nodes = sum(width ** d for d in range(1, depth + 1))
    if nodes >= predictor.max_query:
        raise ValueError(f"enumerating width={width} to depth={depth} needs {nodes} nodes; "
                         f"this predictor allows {predictor.max_query - 1}")
    total = torch.zeros(depth, m, dtype=torch.float64)
    count = torch.zeros(depth, dtype=torch.float64)
    n = predictor.num_codes
    for b in range(g.shape[0]):
        for t in range(1, n):
            d = min(depth, n - t)
            for j, marginal in enumerate(_marginals(predictor, g[b:b + 1], codes[b], t, d, width, sampler)):
                total[j] += marginal.topk(m).values.cpu()
                count[j] += 1
    return total / count.clamp(min=1)[:, None]
