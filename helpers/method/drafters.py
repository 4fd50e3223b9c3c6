"""Drafters: from the hidden state h_t, logits for the next K codes c_{t+1..t+K}.

- `ReusedHeads`: the frozen heads, H_{t+j}(h_t) (offsets b = 0, no added parameters).
- `PositionOffsets`: H_{t+j}(h_t + b_j), K trained vectors shared by every t (K x hidden parameters), added after
  the final RMSNorm: W_{t+j} h_t + W_{t+j} b_j, a per-(position, depth) logit bias.
- `PreNormOffsets`: H_{t+j}(norm(r_t + b_j)), the same K vectors added to the residual stream r_t before the final
  norm (the predictor's own frozen one), h_t = norm(r_t): a translation of the state the norm then rescales.
- `MedusaHeads`: a new Linear(hidden, vocab) per start position t and depth j (initialised from H_{t+j}).

A drafter reads h_t, or r_t where `prenorm` is set; `CodePredictor.teacher_forced_hidden(prenorm=True)` and the
fused call give r, and h = `CodePredictor.final_norm(r)`. Candidates are the top-m tokens of the draft logits at
each depth (deterministic).

Trained parameters are masters in at least float32 (`master_dtype`: float32 beside a bf16 / fp16 code predictor,
float64 beside a float64 one), cast to the hidden state's dtype where used; the training loss runs in the master
dtype. Adam at lr 1e-3 on bf16 parameters would lose every update smaller than half a bf16 step of |b|.
"""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.predictor import CodePredictor
from helpers.method.stack import rms_norm
from helpers.method.sampler import SamplerConfig, target_probs


def _position(t, device: torch.device) -> torch.Tensor:
    """A code position as a [1] tensor: a tensor t as it is (traced, compiled: never a constant), an int on `device`."""
    return t.reshape(1) if isinstance(t, torch.Tensor) else torch.tensor([t], device=device)


class Drafter(nn.Module):
    """Base: drafts by the code predictor's own heads, offset by `offsets` [K, H] (zeros here)."""

    kind = "reused"
    prenorm = False           # reads the residual stream r_t before the final norm (else h_t after it)

    def __init__(self, predictor: CodePredictor, depth: int = 3):
        super().__init__()
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth < predictor.num_codes:
            raise ValueError(f"draft depth K must be an integer in 1..{predictor.num_codes - 1}, got {depth!r}")
        self.depth = depth
        self.num_codes = predictor.num_codes
        self.hidden_size = predictor.hidden_size
        self._heads = [head.weight for head in predictor.official.lm_head]   # frozen, not our parameters
        self._predictor = [predictor]                  # read, not registered: the predictor is not our child
        norm = predictor.official.model.norm
        self._final_norm = (norm.weight, norm.variance_epsilon)                # frozen too (a tuple: not registered)
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

    def draft_weights(self, t, depth: int, heads: torch.Tensor | None = None) -> torch.Tensor:
        """The weights [depth, H, V] (x @ W) that map h_t to the draft logits of c_{t+1..t+depth}, gathered on the
        device: t an int or a [1] tensor (a compiled or captured round: no host read).

        heads: the code predictor's heads stacked [15, H, V] (row i produces c_{i+1}; `FusedCore.heads`), default
        its own stack's (`CodePredictor.stack`). Rows past c15 repeat the last head (a clamped index): drafts past
        the frame's end are meaningless and never read (a round masks those nodes)."""
        heads = self._predictor[0].stack.heads if heads is None else heads
        rows = _position(t, heads.device) + torch.arange(depth, device=heads.device)
        last = torch.full_like(rows, heads.shape[0] - 1)              # `minimum`, not `clamp`: integer in Core ML
        return heads.index_select(0, torch.minimum(rows, last))

    def draft_input(self, h: torch.Tensor, j: int | list[int]) -> torch.Tensor:
        """What head H_{t+j} reads: h [..., H] (+ b_j), or norm(r + b_j) for a `prenorm` drafter (h is then r); for a
        list of depths j, [len(j), ..., H], one norm over them all."""
        b = self.offsets
        x = [h if b is None else h + b[i - 1].to(h.dtype) for i in (j if isinstance(j, list) else [j])]
        x = torch.stack(x) if isinstance(j, list) else x[0]
        return self.final_norm(x) if self.prenorm else x

    def final_norm(self, r: torch.Tensor) -> torch.Tensor:
        """The predictor's frozen final norm in r's dtype (`rms_norm`, default layout): r [..., H] -> [..., H]."""
        return rms_norm(r, self._final_norm[0].detach().to(r.dtype), self._final_norm[1])

    def draft_logits(self, h: torch.Tensor, t, depth: int | None = None,
                     heads: torch.Tensor | None = None) -> torch.Tensor:
        """Draft logits from h_t (r_t if `prenorm`), in h's dtype: the one drafting function (training, calibration,
        every round). h [n, H] -> [n, depth, V] for c_{t+1..t+depth} (depth <= K); t and heads as `draft_weights`."""
        depth = self.depth if depth is None else depth
        x = self.draft_input(h, list(range(1, depth + 1)))                              # [depth, n, H]
        return torch.matmul(x, self.draft_weights(t, depth, heads).to(h.dtype)).transpose(0, 1)

    def head_stack(self) -> torch.Tensor:
        """The weights `head_weight(t, j)` of every (t, j) at once, [15, K, V, H] (H_15 where t + j > 15: a slot no
        loss reads). A drafter that drafts otherwise than `draft_logits` does overrides `loss` too."""
        n = self.num_codes
        return torch.stack([self._heads[min(t + j, n) - 1].detach() for t in range(1, n + 1)
                            for j in range(1, self.depth + 1)]).unflatten(0, (n, self.depth))

    def loss(self, h: torch.Tensor, codes: torch.Tensor, probs: torch.Tensor | None = None) -> torch.Tensor:
        """Summed draft cross-entropy over depths j <= K and valid t, mean over the batch: the CE of `draft_logits`
        (tests/drafting.py `per_head_loss` is that definition, one (t, j) at a time), in one batched product.

        h [B, 15, H] (h[:, t-1] = h_t; r_t if `prenorm`), codes [B, 16] (c0..c15) -> scalar, computed in `master_dtype`.
        The labels are the codes c_{t+j}; with `probs` [B, 15, V], the code predictor's own sampling distributions on
        the same frames (`target_distribution`), p_{t+j} instead: soft labels, Medusa-2's self-distillation loss, whose
        expectation over the frames' draws is what a draft must guess, at a fraction of one draw's noise.
        """
        h = h.to(self.master_dtype)
        t = torch.arange(1, self.num_codes + 1, device=h.device)[:, None]
        target = t + torch.arange(1, self.depth + 1, device=h.device)[None]      # [15, K]: code index t + j
        valid = target <= self.num_codes
        x = torch.stack([self.draft_input(h, j) for j in range(1, self.depth + 1)], dim=2)   # [B, 15, K, H]
        logits = torch.einsum("btjh,tjvh->btjv", x, self.head_stack().to(h.dtype))[:, valid]   # [B, n valid, V]
        code = target[valid]                                                   # [n valid]: their t + j
        if probs is None:
            labels = codes[:, code].flatten()                                  # [B n]
        else:
            labels = probs[:, code - 1].flatten(0, 1).to(logits.dtype)         # [B n, V]
        return F.cross_entropy(logits.flatten(0, 1), labels, reduction="sum") / h.shape[0]

    @torch.no_grad()
    def target_distribution(self, h: torch.Tensor, sampler: SamplerConfig) -> torch.Tensor:
        """The code predictor's sampling distribution p_t at every position of the frames h reads (the frozen heads on
        h_t, after the frozen final norm where h is r): h [B, 15, H] -> [B, 15, V] in at least float32."""
        h = self.final_norm(h) if self.prenorm else h
        heads = torch.stack([w.detach() for w in self._heads]).to(h.dtype)           # [15, V, H]
        return target_probs(torch.einsum("bth,tvh->btv", h, heads), sampler)


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


class PreNormOffsets(PositionOffsets):
    """The same K vectors b_j [K, H], added to the residual stream before the frozen final norm:
    H_{t+j}(norm(r_t + b_j)).

    Where the post-norm offsets shift every logit of H_{t+j} by the fixed W_{t+j} b_j, these move the state before
    the norm: its direction changes by an amount that depends on r_t (a small |r_t| moves more), so the change of
    the logits does too; r_t + b_j matches r_{t+j} best when E[r_{t+j} - r_t] is constant (a translation)."""

    kind = "offsets_prenorm"
    prenorm = True


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

    def draft_weights(self, t, depth: int, heads: torch.Tensor | None = None) -> torch.Tensor:
        """The heads of start position t (an int, or a [1] tensor read without a host read), depths 1..depth, as
        [depth, H, V] (`Drafter.draft_weights`; Medusa drafts with its own heads, never the predictor's `heads`;
        past c15 they repeat H_15)."""
        return self.heads.index_select(0, _position(t, self.heads.device) - 1)[0, :depth].transpose(-1, -2)

    def head_stack(self) -> torch.Tensor:
        """The trained heads themselves (indexing one head at a time would fill a gradient of all 15 K heads per
        head: the step about 20x slower)."""
        return self.heads


def top_candidates(drafter: Drafter, h: torch.Tensor, t, depth: int, width: int,
                   heads: torch.Tensor | None = None) -> torch.Tensor:
    """Draft, take the top m: the candidates [n, depth, width] (long, by rank) for c_{t+1..t+depth} from the states
    h [n, H] (`Drafter.draft_logits`; t and heads as there). Every round, replay, calibration and the walkthrough
    draft through here; `helpers.method.round.pack_query` packs the candidates behind a root."""
    return drafter.draft_logits(h, t, depth, heads).topk(width, dim=-1).indices


DRAFTERS = {cls.kind: cls for cls in (ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads)}
OFFSET_KINDS = ("offsets", "offsets_prenorm")       # the two places the offsets can enter (the ablation)
DRAFTER_KINDS = ("reused", "medusa") + OFFSET_KINDS  # the order runs list them in by default


def make_drafter(kind: str, predictor: CodePredictor, depth: int = 3) -> Drafter:
    """A drafter by name: 'reused', 'offsets', 'offsets_prenorm' or 'medusa'."""
    if kind not in DRAFTERS:
        raise ValueError(f"unknown drafter {kind!r}; allowed: {', '.join(DRAFTERS)}")
    return DRAFTERS[kind](predictor, depth)
