"""The fused draft+verify call: one static-shape module per tree, used by the decoders and exported as is.

`FusedStep(core, tree, drafter)` is one round of speculative decoding as a single `nn.Module`:

    forward(tokens [B, q], k [L, B, kv, S, d], v [L, B, kv, S, d], t [1] int)
      -> logits [B, q, V]            target logits at the root and every node (before the sampler)
         k_new, v_new [L, B, kv, q, d] keys/values of the query (the host commits the accepted path)
         drafts [B, q, D, m] (long)  next round's top-m candidates at depths 1..D from EVERY node
                                     (or hidden [B, q, H] when the drafter cannot be fused)

`q = N + 1` is the root (`c_t`, the code just sampled) followed by the tree's nodes; `t` is the root's
code position (1..14). Everything that depends on `t` is a row of a buffer indexed by `t` (one
`index_select` each): the flat embedding-row offset of each token (the 15 input tables `E_1..E_15`
are stacked into one [15 V, H_talker] table), RoPE cos/sin of each token (position `t + 1 + depth`),
the additive mask over [cache slots, query] (slots `< t + 1` visible, then the ancestor mask), and a
window of head indices (the 15 heads are stacked into [15, V, H]; nodes at depth `d` all use head
`t + d`, so each depth group reads one row of one gathered window). No Python control flow depends
on tensor values, every tensor has rank <= 5, and the AR call is the same module with `tree=None`
(q = 1, no drafts).

Near the frame's end (root at `t`, nodes deeper than `14 - t`) a module built on the full tree still
runs with clamped table/head indices; those nodes' outputs are meaningless and the host never
descends into them (the walk uses the pruned tree). The PyTorch decoder instead uses one module per
distinct pruned tree (`FusedCore.step`), which saves their compute. Either way the committed codes
are the AR codes.

`FusedCore` holds what the step modules share: references to the official layer weights (live), and
copies that static gathers need (stacked tables and heads, merged q/k norm weights, RoPE tables).
Copies are rebuilt by `refresh()` when the official weights change (data pointer or version).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
import torch.nn.functional as F

from .code_predictor import CodePredictor
from .drafters import Drafter, MedusaHeads
from .tree import SparseTree


def fusable(drafter: Drafter | None) -> bool:
    """True for drafters whose draft logits are heads (+ offsets) the fused module can compute itself."""
    if drafter is None or type(drafter).draft_logits is not Drafter.draft_logits:
        return False
    return type(drafter).head_weight in (Drafter.head_weight, MedusaHeads.head_weight)


class FusedCore(nn.Module):
    """Shared weights and tables of the fused calls of one `CodePredictor` (all buffers, no new parameters).

    positions: RoPE tables cover positions 0..slots + max_depth + 1 (a root at c_14 plus K deeper nodes).
    """

    def __init__(self, predictor: CodePredictor, max_depth: int = 3):
        super().__init__()
        self.predictor = predictor
        p = predictor
        self.num_codes, self.slots, self.vocab = p.num_codes, p.slots, p.vocab_size
        self.num_layers, self.nh, self.nkv, self.hd = len(p.layers), p.num_heads, p.num_kv_heads, p.head_dim
        self.max_depth = max_depth
        self.eps = p.layers[0].self_attn.q_norm.variance_epsilon
        self._signature = None
        self.refresh()

    # ------------------------------------------------------------------ weights
    def _sources(self) -> list[torch.Tensor]:
        p = self.predictor
        heads = [h.weight for h in p.official.lm_head]
        tables = [e.weight for e in p.official.model.codec_embedding]
        norms = [w for layer in p.layers for w in (layer.self_attn.q_norm.weight, layer.self_attn.k_norm.weight)]
        return heads + tables + norms + [p.c0_embedding.weight]

    def refresh(self) -> bool:
        """Rebuild the copied tensors if the official weights changed since the last build. Returns rebuilt."""
        sources = self._sources()
        signature = tuple((w.data_ptr(), w._version, w.dtype, w.device) for w in sources)
        if signature == self._signature:
            return False
        p = self.predictor
        dtype, device = p.dtype, p.device
        with torch.no_grad():
            heads = [h.weight.detach() for h in p.official.lm_head]
            heads += heads[-1:] * (2 * self.max_depth)      # rows past c15 repeat the last head (clamped index)
            self.register_buffer("heads", torch.stack(heads), persistent=False)             # [15 + 2 Dmax, V, H]
            self.register_buffer("tables", torch.cat([e.weight.detach() for e in p.official.model.codec_embedding]),
                                 persistent=False)                                   # [15 V, H_talker]
            scale = p.layers[0].self_attn.scaling
            qk = [torch.cat((layer.self_attn.q_norm.weight.detach().expand(self.nh, -1) * scale,
                             layer.self_attn.k_norm.weight.detach().expand(self.nkv, -1))) for layer in p.layers]
            self.register_buffer("qk_norm", torch.stack(qk), persistent=False)      # [L, nh + nkv, d]
            positions = torch.arange(self.slots + self.max_depth + 2, device=device)
            cos, sin = p.official.model.rotary_emb(torch.zeros((), dtype=dtype, device=device), positions[None])
            half = self.hd // 2
            self.register_buffer("cos", cos[0], persistent=False)                   # [P, d]
            self.register_buffer("sin", torch.cat((-sin[0, :, :half], sin[0, :, half:]), -1), persistent=False)
        self._signature = signature
        self.layer_weights = [(layer.input_layernorm.weight, layer.self_attn.q_proj, layer.self_attn.k_proj,
                               layer.self_attn.v_proj, layer.self_attn.o_proj, layer.post_attention_layernorm.weight,
                               layer.mlp) for layer in p.layers]
        self.norm_weight = p.official.model.norm.weight
        self.mask_min = max(torch.finfo(dtype).min, -3.0e4)   # exp() underflows to 0 in any dtype; finite in fp16
        self.softmax_dtype = None if dtype in (torch.float32, torch.float64) else torch.float32
        self.prefill_cos, self.prefill_sin = self.cos[:2, None], self.sin[:2, None]
        mask = torch.full((2, self.slots + 2), self.mask_min, dtype=dtype, device=device)
        mask[:, self.slots:] = torch.zeros(2, 2, dtype=dtype, device=device).masked_fill(
            ~torch.ones(2, 2, dtype=torch.bool, device=device).tril(), self.mask_min)
        self.prefill_mask = mask
        return True

    # ------------------------------------------------------------------ the decoder stack
    def layers(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
               k_cache: torch.Tensor, v_cache: torch.Tensor):
        """x [B, q, H_talker]; cos/sin [q, 1, d] (sin sign-folded); mask [1, q, S + q] additive;
        caches [L, B, kv, S, d] -> hidden [B, q, H] (final norm applied), k_new, v_new [L, B, kv, q, d]."""
        batch, q = x.shape[0], x.shape[1]
        nh, nkv, hd = self.nh, self.nkv, self.hd
        groups = nh // nkv
        h = self.predictor.official.small_to_mtp_projection(x)
        k_out, v_out = [], []
        for li, (w_in, q_proj, k_proj, v_proj, o_proj, w_post, mlp) in enumerate(self.layer_weights):
            a = F.rms_norm(h, (h.shape[-1],), w_in, self.eps)
            qk = torch.cat((q_proj(a).view(batch, q, nh, hd), k_proj(a).view(batch, q, nkv, hd)), dim=2)
            qk = F.rms_norm(qk, (hd,), None, self.eps) * self.qk_norm[li]            # q rows carry 1/sqrt(d)
            qk = qk * cos + torch.roll(qk, hd // 2, -1) * sin                      # RoPE
            qs = qk[:, :, :nh].reshape(batch, q, nkv, groups, hd).permute(0, 2, 3, 1, 4)   # [B, kv, g, q, d]
            ks = qk[:, :, nh:].transpose(1, 2)                                       # [B, kv, q, d]
            vs = v_proj(a).view(batch, q, nkv, hd).transpose(1, 2)
            k_out.append(ks)
            v_out.append(vs)
            keys = torch.cat((k_cache[li], ks), dim=2)[:, :, None]                   # [B, kv, 1, S + q, d]
            values = torch.cat((v_cache[li], vs), dim=2)[:, :, None]
            scores = torch.matmul(qs, keys.transpose(-1, -2)) + mask                 # [B, kv, g, q, S + q]
            probs = torch.softmax(scores, dim=-1, dtype=self.softmax_dtype)
            if self.softmax_dtype is not None:
                probs = probs.to(values.dtype)
            o = torch.matmul(probs, values).permute(0, 3, 1, 2, 4).reshape(batch, q, nh * hd)
            h = h + o_proj(o)
            h = h + mlp(F.rms_norm(h, (h.shape[-1],), w_post, self.eps))
        h = F.rms_norm(h, (h.shape[-1],), self.norm_weight, self.eps)
        return h, torch.stack(k_out), torch.stack(v_out)

    def prefill(self, g: torch.Tensor, c0: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor):
        """[g, E0(c0)] over an empty cache (zeros, fully masked). g [B, H_talker], c0 [B]
        -> logits of c1 [B, V], k_new, v_new [L, B, kv, 2, d], h_1 [B, H]."""
        x = torch.cat((g[:, None].to(self.heads.dtype), self.predictor.c0_embedding(c0[:, None])), dim=1)
        hidden, k, v = self.layers(x, self.prefill_cos, self.prefill_sin, self.prefill_mask, k_cache, v_cache)
        h1 = hidden[:, 1]
        return F.linear(h1, self.heads[0]), k, v, h1

    def step(self, tree: SparseTree | None, drafter: Drafter | None = None) -> "FusedStep":
        """The fused call for `tree` (None: the AR call, q = 1) sharing this core's weights."""
        return FusedStep(self, tree, drafter)


class FusedStep(nn.Module):
    """One fused draft+verify call for one tree (see the module docstring). tree None: the AR call.

    drafter: fused into the call when `fusable(drafter)` (drafts output), else hidden states are output
    and the host drafts. `width` = candidates per depth in the drafts output (default max(tree.width)).
    """

    def __init__(self, core: FusedCore, tree: SparseTree | None, drafter: Drafter | None = None,
                 width: int | None = None):
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
        self.width = (width or max(tree.width)) if tree is not None else 0
        if self.fused_drafts and self.depth > drafter.depth:
            raise ValueError(f"tree depth {self.depth} exceeds the drafter's K={drafter.depth}")
        # depth groups: nodes are sorted by depth, so depth d occupies query[start_d:end_d]
        self.groups = [(d, depth.index(d), len(depth) - depth[::-1].index(d)) for d in range(self.depth + 1)]
        d = torch.tensor(depth)
        t = torch.arange(n)[:, None]                                                 # rows: root position t
        device = core.heads.device
        # code position of each token t + d -> row offset of its table E_{t+d} in the stacked tables
        self.register_buffer("emb_offset", ((t + d).clamp(1, n) - 1) * core.vocab, persistent=False)   # [15, q]
        self.register_buffer("position", t + 1 + d, persistent=False)                # [15, q] RoPE positions
        cache_visible = (torch.arange(core.slots)[None, None] < t[:, :, None] + 1).expand(n, self.q, -1)
        tree_mask = tree.mask if tree is not None else torch.ones(1, 1, dtype=torch.bool)
        visible = torch.cat((cache_visible, tree_mask[None].expand(n, -1, -1)), dim=-1)   # [15, q, S + q]
        self.register_buffer("visible", visible, persistent=False)
        medusa = self.fused_drafts and isinstance(drafter, MedusaHeads)
        window = self.depth + 1 + (0 if medusa or not self.fused_drafts else self.depth)
        self.window = window
        self.register_buffer("head_index", (t + torch.arange(window)).clamp(max=n - 1), persistent=False)
        self.use_views = core.heads.shape[0] >= n - 1 + window      # padded stack: rows t..t+W-1 always exist
        self.register_buffer("medusa_index", (t + torch.arange(self.depth + 1)).clamp(max=n - 1), persistent=False)
        self.medusa = medusa
        self.t_inputs = [torch.tensor([i], device=device) for i in range(n)]        # the `t` input, prebuilt
        self.to(device)
        self._tables()

    def _tables(self) -> None:
        """Per-t float tables in the model dtype: cos/sin [15, q, 1, d], additive mask [15, 1, q, S + q]."""
        core = self.core
        self.cos_t = core.cos[self.position][:, :, None]
        self.sin_t = core.sin[self.position][:, :, None]
        self.mask_t = torch.zeros(self.visible.shape, dtype=core.cos.dtype, device=core.cos.device).masked_fill(
            ~self.visible, core.mask_min)[:, None]
        self._dtype = core.cos.dtype

    @property
    def outputs(self) -> tuple[str, ...]:
        last = ("drafts",) if self.fused_drafts else ("hidden",) if self.tree is not None else ()
        return ("logits", "k_new", "v_new") + last

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor):
        core = self.core
        if self.cos_t.dtype != core.cos.dtype or self.cos_t.device != core.cos.device:
            self._tables()
        t = t.reshape(1)
        if self.use_views and t.device.type == "cpu" and not torch.jit.is_tracing():
            # eager CPU: the same rows as below, read as views (no copy of the heads per call)
            ti = int(t)
            emb_offset, cos, sin, mask = self.emb_offset[ti], self.cos_t[ti], self.sin_t[ti], self.mask_t[ti]
            heads = core.heads[ti:ti + self.window]
        else:
            emb_offset = self.emb_offset.index_select(0, t)
            cos, sin = self.cos_t.index_select(0, t)[0], self.sin_t.index_select(0, t)[0]
            mask = self.mask_t.index_select(0, t)[0]                                       # [1, q, S + q]
            heads = core.heads.index_select(0, self.head_index.index_select(0, t)[0])     # [W, V, H]
        x = F.embedding(tokens + emb_offset, core.tables)                                 # [B, q, H_talker]
        hidden, k_new, v_new = core.layers(x, cos, sin, mask, k_cache, v_cache)
        if self.fused_drafts:
            logits, drafts = self._heads(hidden, heads, t)
            return logits, k_new, v_new, drafts
        if self.depth == 0:
            logits = F.linear(hidden, heads[0])
        else:
            logits = torch.cat([F.linear(hidden[:, s:e], heads[d]) for d, s, e in self.groups], dim=1)
        if self.tree is not None:
            return logits, k_new, v_new, hidden
        return logits, k_new, v_new

    def _heads(self, hidden: torch.Tensor, heads: torch.Tensor, t: torch.Tensor, groups=None):
        """Target logits [B, q, V] and top-m drafts for depths 1..D [B, q, D, m] from every token.

        Reused heads / offsets: a depth-d token reads head window rows d..d+D (target, then drafts for
        c_{+1..+D}) from h + [0, b_1..b_D]: one matmul per depth group, one top-k for all."""
        D = self.depth
        groups = groups or self.groups
        if self.medusa:
            logits = torch.cat([F.linear(hidden[:, s:e], heads[d]) for d, s, e in groups], dim=1)
            med = self.drafter.heads.index_select(0, self.medusa_index.index_select(0, t)[0])   # [D+1, K, V, H]
            x = hidden[None]
            draft = torch.cat([torch.matmul(x[:, :, s:e], med[d, :D].transpose(-1, -2)[:, None])
                               for d, s, e in groups], dim=2)                              # [D, B, q, V]
        else:
            b = self.drafter.offsets
            x = hidden[None] if b is None else hidden[None] + torch.cat((b.new_zeros(1, b.shape[1]), b[:D]))[:, None, None]
            both = [torch.matmul(x[:, :, s:e], heads[d:d + D + 1].transpose(-1, -2)[:, None]) for d, s, e in groups]
            both = torch.cat(both, dim=2) if len(both) > 1 else both[0]                    # [D+1, B, q, V]
            logits, draft = both[0], both[1:]
        return logits, draft.topk(self.width, dim=-1).indices.permute(1, 2, 0, 3)

    def first_drafts(self, h1: torch.Tensor) -> torch.Tensor:
        """Drafts from the prefill's h_1 (the first round's root c_1 as a depth-0 token of a root at t = 0).

        h1 [B, H] -> [B, D, m]."""
        zero = self.head_index.new_zeros(1)
        heads = self.core.heads.index_select(0, self.head_index.index_select(0, zero)[0])
        return self._heads(h1[:, None], heads, zero, [(0, 0, 1)])[1][:, 0]


@dataclass
class FusedPlan:
    """What the host needs for a round whose root is at code position t (computed once per decoder)."""

    t: int
    step: FusedStep
    tree: SparseTree | None
    t_tensor: torch.Tensor        # [1] long
    u_index: torch.Tensor         # [q] column of u used by each token's sample
    node_depth: torch.Tensor      # [N] depth - 1 of each node (row of the drafts)
    node_rank: torch.Tensor       # [N] rank of each node (column of the drafts)
    children: list[list[int]]     # query index -> children query indices
    paths: list[torch.Tensor]     # query index -> [root, ..., node] query indices (the KV entries to keep)
    out_pos: list[int]            # code position each token's output produces
    draft_depth: int              # drafts this round's tree needs (rows of the candidates)
    draft_width: int              # candidates per depth (columns)


def make_plans(core: FusedCore, tree: SparseTree, drafter: Drafter) -> dict[int, FusedPlan]:
    """One plan per root position t = 1..14: the tree pruned at depth 14 - t and its fused call."""
    n = core.num_codes
    device = core.heads.device
    steps: dict[SparseTree | None, FusedStep] = {}
    plans = {}
    for t in range(1, n):
        sub = tree.pruned(n - 1 - t)
        if sub not in steps:
            steps[sub] = FusedStep(core, sub, drafter)
        depth = sub.depth_list if sub is not None else [0]
        parent = sub.parent.tolist() if sub is not None else [-1]
        paths = []
        for i in range(len(depth)):
            chain = [i]
            while parent[chain[-1]] > 0:
                chain.append(parent[chain[-1]])
            paths.append(torch.tensor(([0] if i else []) + chain[::-1], device=device))
        plans[t] = FusedPlan(
            t=t, step=steps[sub], tree=sub, t_tensor=steps[sub].t_inputs[t],
            u_index=torch.tensor([t + d for d in depth], device=device),
            node_depth=torch.tensor([d - 1 for d in depth[1:]], device=device, dtype=torch.long),
            node_rank=(sub.rank[1:] if sub is not None else torch.zeros(0, dtype=torch.long)).to(device),
            children=[sorted(c.values()) for c in sub.children] if sub is not None else [[]],
            paths=paths, out_pos=[t + d + 1 for d in depth],
            draft_depth=sub.max_depth if sub is not None else 0,
            draft_width=max(sub.width) if sub is not None else 0)
    return plans
