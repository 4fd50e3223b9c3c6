"""`FusedStep`: one fused draft+verify call for one tree (the AR call for none). See `helpers.method.fused`."""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.capture import on_device_path
from helpers.method.drafters import Drafter, top_candidates
from helpers.method.fused.core import FusedCore
from helpers.method.kernels import apply
from helpers.method.tree import SparseTree


def fusable(drafter: Drafter | None) -> bool:
    """True for a drafter that drafts on the device (`Drafter.drafts_on_device`: heads + offsets through
    `Drafter.draft_weights`), so a call or a compiled round can draft in it (others draft at a host int t: the eager
    decoder only)."""
    return drafter is not None and drafter.drafts_on_device


class FusedStep(nn.Module):
    """One fused verify call for one tree (see the module docstring). tree None: the AR call.

    drafter: when `fusable(drafter)`, the call also drafts from every node (`drafts` output, through the one drafting
    function `Drafter.draft_logits`: what a device whose walk runs on its host needs, e.g. the Core ML export);
    otherwise a tree call outputs the hidden states (the decoders' rounds draft from the stop node only:
    `helpers.method.round`). `width` = candidates per depth in the drafts output (default max(tree.width)).
    prenorm (default: the drafter's): drafts from the pre-norm state r, norm(r + b_j) (the target row is norm(r) = h);
    a tree call without fused drafts then outputs r as its `hidden`.
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
        self.register_buffer("head_index", (t + torch.arange(self.depth + 1, device=device)).clamp(max=n - 1),
                             persistent=False)                                        # [15, D + 1]: target heads
        # code position s = t + d + 1 of each depth group's states (drafts from there), within the frame (<= 15)
        self.register_buffer("draft_pos", (t + 1 + torch.arange(self.depth + 1, device=device)).clamp(max=n),
                             persistent=False)                                        # [15, D + 1]
        self._tables()

    def _tables(self) -> None:
        """Per-t float tables in the model dtype: cos/sin [15, q, 1, d], additive mask [15, 1, q, S + q];
        and `rows[t]`, everything a call at root position t reads, as views (eager calls gather nothing)."""
        core = self.core
        device = core.heads.device
        if self.visible.device != device:              # the model moved since this step was built
            self.to(device)
        self.cos_t = core.cos[self.position][:, :, None]
        self.sin_t = core.sin[self.position][:, :, None]
        self.mask_t = torch.zeros(self.visible.shape, dtype=core.cos.dtype, device=core.cos.device).masked_fill(
            ~self.visible, core.mask_min)[:, None]
        self.rows = [(self.emb_offset[t], self.cos_t[t], self.sin_t[t], self.mask_t[t],      # padded heads:
                      [core.head_linears[t + d] for d, _, _ in self.groups]) for t in range(core.num_codes)]
        self._generation = core.generation

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

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor,
                clock=None):
        """The call at root position t [1]. Eager on a CPU t: `call_at(int(t))` (rows read as views, any kernel; no
        device sync there). Traced, exported, compiled, on an accelerator or under `helpers.method.capture.DeviceOps`:
        every t-dependent row gathered by `index_select` (kernel 'dense'), so one graph serves every t."""
        if (t.device.type == "cpu" and not torch.jit.is_tracing() and not torch.compiler.is_compiling()
                and not on_device_path()):
            return self.call_at(tokens, k_cache, v_cache, int(t), clock)
        core = self.core
        if core.kernel != "dense":
            raise ValueError(f"kernel {core.kernel!r} runs eagerly with the root position as a host int (`call_at`; "
                             "a CPU tensor t); the gathered call (tracing, export, compilation, CUDA) needs kernel "
                             "'dense'")
        if self._generation != core.generation:
            self._tables()
        t = t.reshape(1)
        emb_offset = self.emb_offset.index_select(0, t)
        cos, sin = self.cos_t.index_select(0, t)[0], self.sin_t.index_select(0, t)[0]
        mask = self.mask_t.index_select(0, t)[0]                                           # [1, q, S + q]
        heads = core.heads.index_select(0, self.head_index.index_select(0, t)[0])         # [D + 1, H, V]
        heads = [heads[i] for i in range(self.depth + 1)]                                 # one per depth group
        return self._call(tokens, k_cache, v_cache, self.draft_pos.index_select(0, t)[0], emb_offset, cos, sin, mask,
                          heads, clock)

    def call_at(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: int, clock=None):
        """The same call with the root position as a host int: rows read as views (what eager CPU calls run).
        clock: optional `helpers.method.clock.PhaseClock`, told when the layers end (the rest is the heads)."""
        if self._generation != self.core.generation:
            self._tables()
        emb_offset, cos, sin, mask, heads = self.rows[t]
        return self._call(tokens, k_cache, v_cache, self.draft_pos[t], emb_offset, cos, sin, mask, heads, clock)

    def _call(self, tokens, k_cache, v_cache, draft_pos, emb_offset, cos, sin, mask, heads, clock=None):
        """heads: the target head of each depth group ([H, V] dense rows or the kernel's linears); draft_pos [D + 1]:
        the code position each depth group's drafts start from."""
        core = self.core
        x = F.embedding(tokens + emb_offset, core.tables)                                 # [B, q, H_talker]
        state, k_new, v_new = core.layers(x, cos, sin, mask, k_cache, v_cache, self.prenorm)   # h, or r (prenorm)
        if clock is not None:
            clock("layers")
        hidden = core.final_norm(state) if self.prenorm else state
        if self.depth == 0:
            logits = apply(hidden, heads[0])
        else:
            logits = torch.cat([apply(hidden[:, s:e], w) for (_, s, e), w in zip(self.groups, heads)], dim=1)
        if self.fused_drafts:
            return logits, k_new, v_new, self._drafts(state, draft_pos)
        if self.tree is not None:
            return logits, k_new, v_new, state
        return logits, k_new, v_new

    def _drafts(self, state: torch.Tensor, draft_pos: torch.Tensor) -> torch.Tensor:
        """Top-m drafts for depths 1..D from every token, [1, q, D, m]: a depth-d token's state is h_s (r_s) at code
        position s = t + d + 1 (`draft_pos[d]`), drafted by `top_candidates` as any round drafts."""
        if state.shape[0] != 1:
            raise ValueError(f"a call with fused drafts decodes one stream (batch 1), got batch {state.shape[0]}")
        return torch.cat([top_candidates(self.drafter, state[0, s:e], draft_pos[d:d + 1], self.depth, self.width,
                                         self.core.heads) for d, s, e in self.groups])[None]      # [1, q, D, m]
