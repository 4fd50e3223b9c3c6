"""`FusedStep`: one fused draft+verify call for one tree (the AR call for none). See `helpers.method.fused`."""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.drafters import Drafter, MedusaHeads
from helpers.method.fused.core import FusedCore
from helpers.method.kernels import apply, apply_each
from helpers.method.tree import SparseTree


def fusable(drafter: Drafter | None) -> bool:
    """True for drafters whose draft logits are heads (+ offsets) the fused module can compute itself."""
    if drafter is None or any(getattr(type(drafter), name) is not getattr(Drafter, name)
                              for name in ("draft_logits", "draft_input")):
        return False
    return type(drafter).head_weight in (Drafter.head_weight, MedusaHeads.head_weight)


class FusedStep(nn.Module):
    """One fused draft+verify call for one tree (see the module docstring). tree None: the AR call.

    drafter: fused into the call when `fusable(drafter)` (drafts output), else hidden states are output
    and the host drafts. `width` = candidates per depth in the drafts output (default max(tree.width)).
    prenorm (default: the drafter's): drafts from the pre-norm state r, norm(r + [0, b_1..b_D]) (the target row is
    norm(r) = h); a tree call without fused drafts then outputs r as its `hidden`.
    """

    def __init__(self, core: FusedCore, tree: SparseTree | None, drafter: Drafter | None = None,
                 width: int | None = None, prenorm: bool | None = None):
        super().__init__()
        self.core, self.tree = core, tree
        n = core.num_codes
        depth = tree.depth_list if tree is not None else [0]
        self.q = len(depth)
        self.depth = max(depth)                                                      # D
        if self.depth > core.max_depth:
            raise ValueError(f"tree depth {self.depth} exceeds the core's max_depth={core.max_depth}")
        self.fused_drafts = fusable(drafter) and self.depth > 0
        self.drafter = drafter if self.fused_drafts else None
        if prenorm is None:
            prenorm = self.fused_drafts and drafter.prenorm
        elif self.fused_drafts and prenorm != drafter.prenorm:
            raise ValueError(f"prenorm={prenorm} contradicts the fused drafter {type(drafter).__name__} "
                             f"(prenorm={drafter.prenorm})")
        self.prenorm = bool(prenorm) and self.depth > 0
        self.width = (width or max(tree.width)) if tree is not None else 0
        if self.fused_drafts and self.depth > drafter.depth:
            raise ValueError(f"tree depth {self.depth} exceeds the drafter's K={drafter.depth}")
        # depth groups: nodes are sorted by depth, so depth d occupies query[start_d:end_d]
        self.groups = [(d, depth.index(d), len(depth) - depth[::-1].index(d)) for d in range(self.depth + 1)]
        device = core.heads.device
        d = torch.tensor(depth, device=device)
        t = torch.arange(n, device=device)[:, None]                                  # rows: root position t
        # code position of each token t + d -> row offset of its table E_{t+d} in the stacked tables
        self.register_buffer("emb_offset", ((t + d).clamp(1, n) - 1) * core.vocab, persistent=False)   # [15, q]
        self.register_buffer("position", t + 1 + d, persistent=False)                # [15, q] RoPE positions
        cache_visible = (torch.arange(core.slots, device=device)[None, None] < t[:, :, None] + 1).expand(n, self.q, -1)
        tree_mask = tree.mask.to(device) if tree is not None else torch.ones(1, 1, dtype=torch.bool, device=device)
        visible = torch.cat((cache_visible, tree_mask[None].expand(n, -1, -1)), dim=-1)   # [15, q, S + q]
        self.register_buffer("visible", visible, persistent=False)
        medusa = self.fused_drafts and isinstance(drafter, MedusaHeads)
        window = self.depth + 1 + (0 if medusa or not self.fused_drafts else self.depth)
        self.window = window
        self.register_buffer("head_index", (t + torch.arange(window, device=device)).clamp(max=n - 1), persistent=False)
        self.use_views = True           # eager CPU forward reads `rows`; False: always the gather path (graphs)
        self.register_buffer("medusa_index", (t + torch.arange(self.depth + 1, device=device)).clamp(max=n - 1),
                             persistent=False)
        self.medusa = medusa
        self.t_inputs = [torch.tensor([i], device=device) for i in range(n)]        # the `t` input, prebuilt
        self._offsets_source = drafter.offsets if self.fused_drafts and not medusa else None
        self._offsets_key = None
        self._tables()
        self._offsets()

    def _tables(self) -> None:
        """Per-t float tables in the model dtype: cos/sin [15, q, 1, d], additive mask [15, 1, q, S + q];
        and `rows[t]`, everything a call at root position t reads, as views (eager calls gather nothing)."""
        core = self.core
        device = core.heads.device
        if self.visible.device != device:              # the model moved since this step was built
            self.to(device)
            self.t_inputs = [t.to(device) for t in self.t_inputs]
        self.cos_t = core.cos[self.position][:, :, None]
        self.sin_t = core.sin[self.position][:, :, None]
        self.mask_t = torch.zeros(self.visible.shape, dtype=core.cos.dtype, device=core.cos.device).masked_fill(
            ~self.visible, core.mask_min)[:, None]
        self.rows = [(self.emb_offset[t], self.cos_t[t], self.sin_t[t], self.mask_t[t],   # padded heads:
                      self._weights(core.head_linears[t:t + self.window])) for t in range(core.num_codes)]   # rows exist
        self._generation = core.generation

    def _weights(self, heads: torch.Tensor | list) -> list:
        """What each depth group's tokens read from the head window heads [W, H, V] (or W laid-out linears, see
        `FusedCore.head_linears`): rows d..d+D as [D+1, H, V] (target and drafts, offsets/reused heads fused) or
        row d [H, V] (target only)."""
        if self.fused_drafts and not self.medusa:
            return [heads[d:d + self.depth + 1] for d, _, _ in self.groups]
        return [heads[d] for d, _, _ in self.groups]

    def _offsets(self) -> torch.Tensor | None:
        """[0, b_1..b_D] as [D+1, 1, H] (None for reused heads), rebuilt when the drafter's offsets change."""
        b = self._offsets_source
        if b is None:
            return None
        if torch.compiler.is_compiling():             # traced as a constant: the value at the last eager call
            return self._offsets_value
        key = (b.data_ptr(), b._version)
        if key != self._offsets_key:
            b = b.detach().to(self.core.heads.dtype)                      # float32 master offsets, cast where used
            self._offsets_value = torch.cat((b.new_zeros(1, b.shape[1]), b[:self.depth]))[:, None]
            self._offsets_key = key
        return self._offsets_value

    @property
    def outputs(self) -> tuple[str, ...]:
        last = ("drafts",) if self.fused_drafts else ("hidden",) if self.tree is not None else ()
        return ("logits", "k_new", "v_new") + last

    def example_inputs(self, t: int = 1, batch: int = 1, seed: int = 0):
        """Inputs of one call (timing, tracing, export): random tokens [B, q], a random full cache, root position
        t [1], on the model's device and in its dtype."""
        core = self.core
        device, dtype = core.heads.device, core.heads.dtype
        gen = torch.Generator(device=device).manual_seed(seed)
        tokens = torch.randint(0, core.vocab, (batch, self.q), generator=gen, device=device)
        shape = (core.num_layers, batch, core.nkv, core.slots, core.hd)
        k = torch.randn(shape, generator=gen, device=device, dtype=dtype)
        v = torch.randn(shape, generator=gen, device=device, dtype=dtype)
        return tokens, k, v, torch.tensor([t], device=device)

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor):
        if self.use_views and t.device.type == "cpu" and not torch.jit.is_tracing():
            return self.call_at(tokens, k_cache, v_cache, int(t))
        # the traced / exported / graph-captured call: every t-dependent row gathered by index_select
        core = self.core
        if core.kernel != "dense":
            raise ValueError(f"kernel {core.kernel!r} runs eagerly with the root position as a host int (`call_at`; "
                             "a CPU tensor t); the gathered call (tracing, export, CUDA graphs) needs kernel 'dense'")
        if self._generation != core.generation:
            self._tables()
        t = t.reshape(1)
        emb_offset = self.emb_offset.index_select(0, t)
        cos, sin = self.cos_t.index_select(0, t)[0], self.sin_t.index_select(0, t)[0]
        mask = self.mask_t.index_select(0, t)[0]                                           # [1, q, S + q]
        heads = core.heads.index_select(0, self.head_index.index_select(0, t)[0])         # [W, H, V]
        return self._call(tokens, k_cache, v_cache, t, emb_offset, cos, sin, mask, self._weights(heads))

    def call_at(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: int, clock=None):
        """The same call with the root position as a host int: rows read as views (what the decoders run).
        clock: optional `helpers.measure.profile.PhaseClock`, told when the layers end (the rest is the heads)."""
        if self._generation != self.core.generation:
            self._tables()
        emb_offset, cos, sin, mask, weights = self.rows[t]
        return self._call(tokens, k_cache, v_cache, self.t_inputs[t] if self.medusa else None,
                          emb_offset, cos, sin, mask, weights, clock)

    def _call(self, tokens, k_cache, v_cache, t, emb_offset, cos, sin, mask, weights, clock=None):
        core = self.core
        x = F.embedding(tokens + emb_offset, core.tables)                                 # [B, q, H_talker]
        state, k_new, v_new = core.layers(x, cos, sin, mask, k_cache, v_cache, self.prenorm)   # h, or r (prenorm)
        if clock is not None:
            clock("layers")
        if self.fused_drafts:
            if tokens.shape[0] != 1:
                raise ValueError(f"a call with fused drafts decodes one stream (batch 1), got batch {tokens.shape[0]}")
            logits, drafts = self._heads(state, weights, t)
            return logits, k_new, v_new, drafts
        hidden = core.final_norm(state) if self.prenorm else state
        if self.depth == 0:
            logits = apply(hidden, weights[0])
        else:
            logits = torch.cat([apply(hidden[:, s:e], w) for (_, s, e), w in zip(self.groups, weights)], dim=1)
        if self.tree is not None:
            return logits, k_new, v_new, state
        return logits, k_new, v_new

    def _heads(self, hidden: torch.Tensor, weights: list[torch.Tensor], t: torch.Tensor | None, groups=None):
        """Target logits [B, q, V] and top-m drafts for depths 1..D [B, q, D, m] from every token.

        Reused heads / offsets: a depth-d token reads head window rows d..d+D (target, then drafts for
        c_{+1..+D}) from h + [0, b_1..b_D] (prenorm: hidden is r, read as norm(r + [0, b_1..b_D])): one matmul per
        depth group, one top-k for all."""
        D = self.depth
        groups = groups or self.groups
        if self.medusa:
            logits = torch.cat([apply(hidden[:, s:e], w) for (_, s, e), w in zip(groups, weights)], dim=1)
            med = self.drafter.heads.index_select(0, self.medusa_index.index_select(0, t)[0])   # [D+1, K, V, H]
            med = med.to(hidden.dtype)                                                   # float32 master heads
            x = hidden[None]
            draft = torch.cat([torch.matmul(x[:, :, s:e], med[d, :D].transpose(-1, -2)[:, None])
                               for d, s, e in groups], dim=2)                              # [D, B, q, V]
        else:                                                                         # one stream: B = 1
            b = self._offsets()
            x = hidden[0].expand(D + 1, -1, -1) if b is None else hidden[0] + b          # [D+1, q, H]
            if self.prenorm:
                x = self.core.final_norm(x)                                              # row 0: norm(r) = h
            both = [apply_each(x[:, s:e], w) for (_, s, e), w in zip(groups, weights)]    # w [D+1, H, V]
            both = torch.cat(both, dim=1) if len(both) > 1 else both[0]                    # [D+1, q, V]
            return both[:1], both[1:].topk(self.width, dim=-1).indices.transpose(0, 1)[None]
        return logits, draft.topk(self.width, dim=-1).indices.permute(1, 2, 0, 3)

    def first_drafts(self, h1: torch.Tensor) -> torch.Tensor:
        """Drafts from the prefill's h_1 (the first round's root c_1 as a depth-0 token of a root at t = 0).

        h1 [1, H] (r_1 for a prenorm step: `FusedCore.prefill(prenorm=True)`) -> [1, D, m]."""
        if self._generation != self.core.generation:
            self._tables()
        return self._heads(h1[:, None], self.rows[0][4][:1], self.t_inputs[0], [(0, 0, 1)])[1][:, 0]
