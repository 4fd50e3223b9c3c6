"""Test drafters and trees used by several test files."""

import torch
import torch.nn.functional as F

from helpers.method.calibration import REFERENCE_TABLE as TABLE, greedy_tree
from helpers.method.drafters import Drafter, MedusaHeads, PositionOffsets, PreNormOffsets, ReusedHeads
from helpers.method.tree import SparseTree


TREES = {
    "chain": SparseTree.chain(3),
    "full2": SparseTree.full(2, 3),
    **{f"sparse{n}": greedy_tree(TABLE, n) for n in (1, 4, 16, 32)},
}


class OracleDrafter(Drafter):
    """Knows the frame's codes (set `codes` [15] = c1..c15 before decoding) and ranks the true code at
    `rank(t, j)` among otherwise random candidates; rank None leaves it out. Exercises every walk branch."""

    kind = "oracle"

    def __init__(self, predictor, depth=3, rank=lambda t, j: 0, seed=0):
        super().__init__(predictor, depth)
        self.rank, self.codes, self.vocab = rank, None, predictor.vocab_size
        self.gen = torch.Generator().manual_seed(seed)

    def draft_logits(self, h, t, depth=None, heads=None):
        """t: an int or a [1] tensor, read on the host (eager decoders only: a captured round refuses the read)."""
        depth, t = self.depth if depth is None else depth, int(t)
        logits = torch.rand(h.shape[0], depth, self.vocab, generator=self.gen, dtype=torch.float64)
        for j in range(1, min(depth, self.num_codes - t) + 1):             # drafts past c15 are never read
            true = int(self.codes[t + j - 1])
            logits[:, j - 1, true] = -1.0                              # out of the top ranks
            r = self.rank(t, j)
            if r is not None:
                order = logits[0, j - 1].argsort(descending=True)
                logits[:, j - 1, true] = logits[0, j - 1, order[r]] + 1e-9 if r == 0 else \
                    (logits[0, j - 1, order[r - 1]] + logits[0, j - 1, order[r]]) / 2
        return logits.to(h.dtype)


def random_drafters(predictor, seed=0):
    """Reused heads, random offsets (after and before the final norm) and random Medusa heads (untrained but not
    trivial)."""
    gen = torch.Generator().manual_seed(seed)
    offsets = PositionOffsets(predictor, offsets=torch.randn(3, predictor.hidden_size, generator=gen,
                                                            dtype=torch.float64).to(predictor.device, predictor.dtype))
    medusa = MedusaHeads(predictor)
    with torch.no_grad():
        medusa.heads.add_(0.5 * medusa.heads.std() * torch.randn(medusa.heads.shape, generator=gen,
                                                                 dtype=torch.float64).to(predictor.device, predictor.dtype))
    prenorm = PreNormOffsets(predictor, offsets=torch.randn(3, predictor.hidden_size, generator=gen,
                                                            dtype=torch.float64).to(predictor.device, predictor.dtype))
    return {"reused": ReusedHeads(predictor), "offsets": offsets, "offsets_prenorm": prenorm, "medusa": medusa}


def per_head_loss(drafter, h, codes):
    """`Drafter.loss` by its definition, one (t, j) at a time: the summed CE of `draft_logits(h_t, t)` over depths
    j <= K and valid t, mean over the batch. h [B, 15, H], codes [B, 16] -> scalar."""
    h = h.to(drafter.master_dtype)
    total = h.new_zeros(())
    for t in range(1, drafter.num_codes):
        depth = min(drafter.depth, drafter.num_codes - t)
        logits = drafter.draft_logits(h[:, t - 1], t, depth)                      # [B, depth, V]
        total = total + F.cross_entropy(logits.flatten(0, 1), codes[:, t + 1:t + 1 + depth].flatten(), reduction="sum")
    return total / h.shape[0]
