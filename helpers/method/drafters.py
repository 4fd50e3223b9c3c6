"""Drafters: from the hidden state h_t, logits for the next K codes c_{t+1..t+K}.

- `ReusedHeads`: the frozen heads, H_{t+j}(h_t) (offsets b = 0, no added parameters).
- `PositionOffsets`: H_{t+j}(h_t + b_j), K trained vectors shared by every t (K x hidden parameters).
- `MedusaHeads`: a new Linear(hidden, vocab) per start position t and depth j (initialised from H_{t+j}).

Candidates are the top-m tokens of the draft logits at each depth (deterministic).

Trained parameters are masters in at least float32 (`master_dtype`: float32 beside a bf16 / fp16 code predictor,
float64 beside a float64 one), cast to the hidden state's dtype where used; the training loss runs in the master
dtype. Adam at lr 1e-3 on bf16 parameters would lose every update smaller than half a bf16 step of |b|.
"""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.predictor import CodePredictor


class Drafter(nn.Module):
    """Base: drafts by the code predictor's own heads, offset by `offsets` [K, H] (zeros here)."""

    kind = "reused"

    def __init__(self, predictor: CodePredictor, depth: int = 3):
        super().__init__()
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth < predictor.num_codes:
            raise ValueError(f"draft depth K must be an integer in 1..{predictor.num_codes - 1}, got {depth!r}")
        self.depth = depth
        self.num_codes = predictor.num_codes
        self.hidden_size = predictor.hidden_size
        self._heads = [head.weight for head in predictor.official.lm_head]   # frozen, not our parameters
        self.master_dtype = torch.promote_types(predictor.dtype, torch.float32)

    @property
    def offsets(self) -> torch.Tensor | None:
        return None

    @property
    def added_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def head_weight(self, t: int, j: int) -> torch.Tensor:
        """Weight [V, H] that maps h_t to the draft logits of c_{t+j}."""
        return self._heads[t + j - 1].detach()

    def draft_logits(self, h: torch.Tensor, t: int, depth: int | None = None) -> torch.Tensor:
        """Draft logits from h_t, in h's dtype. h [n, H] -> [n, depth, V] for c_{t+1..t+depth} (depth <= K,
        t + depth <= 15)."""
        depth = self.depth if depth is None else depth
        if t + depth > self.num_codes:
            raise ValueError(f"cannot draft {depth} codes after c_{t}: the frame ends at c_{self.num_codes}")
        b = self.offsets
        return torch.stack([F.linear(h if b is None else h + b[j - 1].to(h.dtype), self.head_weight(t, j).to(h.dtype))
                            for j in range(1, depth + 1)], dim=1)

    def loss(self, h: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """Summed draft cross-entropy over depths j <= K and valid t, mean over the batch.

        h [B, 15, H] (h[:, t-1] = h_t), codes [B, 16] (c0..c15) -> scalar, computed in `master_dtype`
        """
        h = h.to(self.master_dtype)
        total = h.new_zeros(())
        for t in range(1, self.num_codes):
            depth = min(self.depth, self.num_codes - t)
            logits = self.draft_logits(h[:, t - 1], t, depth)                    # [B, depth, V]
            target = codes[:, t + 1:t + 1 + depth]
            total = total + F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="sum")
        return total / h.shape[0]


class ReusedHeads(Drafter):
    """b = 0: the existing per-position heads read the wrong position's hidden state."""

    kind = "reused"


class PositionOffsets(Drafter):
    """K trained offset vectors b_j [K, H], shared by all start positions (3 x 1024 on the real model)."""

    kind = "offsets"

    def __init__(self, predictor: CodePredictor, depth: int = 3, offsets: torch.Tensor | None = None):
        super().__init__(predictor, depth)
        b = torch.zeros(depth, predictor.hidden_size, dtype=self.master_dtype, device=predictor.device)
        self.b = nn.Parameter(b)
        if offsets is not None:
            self.load_offsets(offsets)

    @property
    def offsets(self) -> torch.Tensor:
        return self.b

    def load_offsets(self, offsets: torch.Tensor) -> None:
        expected = (self.depth, self.hidden_size)
        if tuple(offsets.shape) != expected:
            raise ValueError(f"offsets of shape {tuple(offsets.shape)} do not fit this code predictor: "
                             f"expected [K={self.depth}, hidden={self.hidden_size}]")
        with torch.no_grad():
            self.b.copy_(offsets)


class MedusaHeads(Drafter):
    """One new Linear(hidden, vocab) per start position t = 1..15 and depth j = 1..K (45 on the real model)."""

    kind = "medusa"

    def __init__(self, predictor: CodePredictor, depth: int = 3):
        super().__init__(predictor, depth)
        weights = [self._heads[min(t + j, self.num_codes) - 1].detach().to(self.master_dtype, copy=True)
                   for t in range(1, self.num_codes + 1) for j in range(1, depth + 1)]
        self.heads = nn.Parameter(torch.stack(weights).view(self.num_codes, depth, *weights[0].shape))

    def head_weight(self, t: int, j: int) -> torch.Tensor:
        return self.heads[t - 1, j - 1]


DRAFTERS = {cls.kind: cls for cls in (ReusedHeads, PositionOffsets, MedusaHeads)}


def make_drafter(kind: str, predictor: CodePredictor, depth: int = 3) -> Drafter:
    """A drafter by name: 'reused', 'offsets' or 'medusa'."""
    if kind not in DRAFTERS:
        raise ValueError(f"unknown drafter {kind!r}; allowed: {', '.join(DRAFTERS)}")
    return DRAFTERS[kind](predictor, depth)
