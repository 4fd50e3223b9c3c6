"""Tree calibration: acceptance table a[d][r], greedy sparse tree, expected tokens/step.

a[d-1][r] estimates P(the target code d positions ahead equals the drafter's rank-r candidate).
Under the usual independence assumption a path's acceptance probability is the product of its
a's, a tree's expected accepted length is the sum over its nodes, and the greedy tree that keeps
adding the most probable node is optimal (a child never beats its parent, so the top-N nodes form
a tree).
"""

from __future__ import annotations

import heapq

import torch

from helpers.method.drafters import Drafter, top_candidates
from helpers.method.tree import SparseTree

# A made-up acceptance table a[d][r] (decreasing with depth and rank) to shape trees when a model's own
# is unknown (random-weight timing models, tests).
REFERENCE_TABLE = torch.tensor([[0.50, 0.20, 0.10, 0.06, 0.04, 0.02],
                                [0.40, 0.15, 0.08, 0.05, 0.03, 0.02],
                                [0.30, 0.12, 0.06, 0.04, 0.02, 0.01]], dtype=torch.float64)


@torch.no_grad()
def acceptance_table(drafter: Drafter, h: torch.Tensor, codes: torch.Tensor, width: int = 8) -> torch.Tensor:
    """a [K, width]: how often c_{t+d} is the rank-r draft from h_t, over all frames and valid t.

    h [B, 15, H] (h[:, t-1] = h_t, from free-running or teacher-forced decoding), codes [B, 16] (c0..c15).
    Counted on h's device; the table (a host-side statistic) comes back on the CPU.
    """
    hits = torch.zeros(drafter.depth, width, dtype=torch.float64, device=h.device)
    trials = [0] * drafter.depth
    for t in range(1, drafter.num_codes):
        depth = min(drafter.depth, drafter.num_codes - t)
        cand = top_candidates(drafter, h[:, t - 1], t, depth, width)                        # [B, depth, m]
        match = cand == codes[:, t + 1:t + 1 + depth, None].to(cand.device)
        hits[:depth] += match.sum(0).double()
        trials[:depth] = [n + h.shape[0] for n in trials[:depth]]
    return (hits / hits.new_tensor(trials).clamp(min=1)[:, None]).cpu()


def uncapped_table(drafter: Drafter, h: torch.Tensor, codes: torch.Tensor, size: int, width: int = 8) -> torch.Tensor:
    """a [K, w]: an acceptance table wide enough that the greedy tree of `size` nodes does not take its last rank
    (the table never caps the tree): w starts at max(width, size + 1) and doubles while the tree takes rank w - 1,
    up to the vocabulary (where no rank is left out). h [B, 15, H], codes [B, 16] as `acceptance_table`."""
    vocab = drafter.head_weight(1, 1).shape[0]
    w = min(max(width, size + 1), vocab)
    while True:
        a = acceptance_table(drafter, h, codes, w)
        if w == vocab or max(max(p) for p in greedy_tree(a, size).paths) < w - 1:
            return a
        w = min(2 * w, vocab)


def _check_table(a: torch.Tensor) -> torch.Tensor:
    a = torch.as_tensor(a, dtype=torch.float64)
    if a.dim() != 2 or a.numel() == 0:
        raise ValueError(f"acceptance table must be [depth, width], got shape {tuple(a.shape)}")
    if bool((a < 0).any() or (a > 1).any()):
        raise ValueError("acceptance rates must lie in [0, 1]")
    return a


def greedy_tree(a: torch.Tensor, size: int, max_depth: int | None = None) -> SparseTree:
    """Grow a tree of `size` nodes by repeatedly adding the frontier node with the largest path product.

    a [K, width]; max_depth caps the depth (default K).
    """
    a = _check_table(a)
    depth_cap = a.shape[0] if max_depth is None else max_depth
    if not 1 <= depth_cap <= a.shape[0]:
        raise ValueError(f"max_depth must be in 1..{a.shape[0]} (the table's depth), got {max_depth}")
    if size < 1:
        raise ValueError(f"tree size N must be >= 1, got {size}")
    capacity = sum(a.shape[1] ** d for d in range(1, depth_cap + 1))
    if size > capacity:
        raise ValueError(f"N={size} exceeds the {capacity} nodes a depth-{depth_cap}, "
                         f"width-{a.shape[1]} table can describe")
    frontier = [(-float(a[0, r]), (r,)) for r in range(a.shape[1])]
    heapq.heapify(frontier)
    paths = []
    while len(paths) < size:
        neg, path = heapq.heappop(frontier)
        paths.append(path)
        if len(path) < depth_cap:
            for r in range(a.shape[1]):
                heapq.heappush(frontier, (neg * float(a[len(path), r]), path + (r,)))
    return SparseTree(paths)


def path_probability(path, a: torch.Tensor) -> float:
    """A node's path product a[1][r_1] a[2][r_2] ... (0 beyond the table): its acceptance under independence.
    path: its ranks (r_1, r_2, ...); a [K, width]."""
    prob = 1.0
    for d, r in enumerate(path):
        prob *= float(a[d, r]) if d < a.shape[0] and r < a.shape[1] else 0.0
    return prob


def expected_tokens_per_step(tree: SparseTree, a: torch.Tensor, num_codes: int = 15) -> float:
    """Expected num_codes / calls per frame, pruning at the frame's end as the decoder does.

    Exact under the independence model: at root position t the accepted length is distributed by the
    pruned tree; calls(t) = 1 + E[calls(t + accepted + 1)]; a frame is 1 prefill + calls(1).
    """
    a = _check_table(a)
    calls = [0.0] * (num_codes + 2)
    for t in range(num_codes - 1, 0, -1):
        sub = tree.pruned(num_codes - 1 - t)
        dist = _accept_length_dist(sub, a) if sub is not None else [1.0]
        calls[t] = 1.0 + sum(pr * calls[min(t + n + 1, num_codes)] for n, pr in enumerate(dist))
    return num_codes / (1.0 + calls[1])


def _accept_length_dist(tree: SparseTree, a: torch.Tensor) -> list[float]:
    """P(accepted length = n), n = 0..depth: reach node with prob = path product, stop there w.p. 1 - sum(children)."""
    dist = [0.0] * (tree.max_depth + 1)
    for q in range(tree.size + 1):
        path = tree.paths[q - 1] if q else ()
        reach = path_probability(path, a)
        cont = sum(path_probability(path + (r,), a) for r in tree.children[q])
        dist[len(path)] += reach - cont
    return dist


def tree_margin(tree: SparseTree, a: torch.Tensor) -> dict:
    """Why a greedy tree stops where it does: nodes per depth, its weakest node, the best node it left out (never
    worth more than the weakest: greedy), and the best node one level deeper than the tree (None at depth K).
    Paths as tuples of ranks, products under `path_probability`."""
    a = _check_table(a)
    taken = set(tree.paths)
    frontier = [p + (r,) for p in [()] + tree.paths for r in range(a.shape[1])
                if len(p) < a.shape[0] and p + (r,) not in taken]
    deeper = [p for p in frontier if len(p) == tree.max_depth + 1]
    weakest = min(tree.paths, key=lambda p: path_probability(p, a))
    best_out = max(frontier, key=lambda p: path_probability(p, a)) if frontier else None
    best_deeper = max(deeper, key=lambda p: path_probability(p, a)) if deeper else None
    return {"per_depth": [sum(len(p) == d for p in tree.paths) for d in range(1, tree.max_depth + 1)],
            "weakest": (weakest, path_probability(weakest, a)),
            "best_left_out": None if best_out is None else (best_out, path_probability(best_out, a)),
            "best_deeper": None if best_deeper is None else (best_deeper, path_probability(best_deeper, a))}
