"""The fused draft+verify call: one static-shape module per tree, used by the decoders and exported as is.

`FusedStep(core, tree, drafter)` is one round of speculative decoding as a single `nn.Module`:

    forward(tokens [B, q], k [L, B, kv, S, d], v [L, B, kv, S, d], t [1] int)
      -> logits [B, q, V]            target logits at the root and every node (before the sampler)
         k_new, v_new [L, B, kv, q, d] keys/values of the query (the host commits the accepted path)
         drafts [B, q, D, m] (long)  next round's top-m candidates at depths 1..D from EVERY node
                                     (B = 1: one stream; or hidden [B, q, H] when the drafter cannot be fused)

A pre-norm drafter (`Drafter.prenorm`, offsets added to the residual stream before the final RMSNorm) keeps the last
layer's output r and reads norm(r + [0, b_1..b_D]): row 0 is norm(r) = h, the target logits; nothing else changes.

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

This is the deployed decoder stack; its reference is `helpers.method.predictor.CodePredictor` (the same
computation over the official modules as they are), and the tests check the two agree.

`FusedCore` holds what the step modules share: copies of the official weights laid out for few, cheap
ops (stacked tables; heads and projections transposed to [in, out], q/k/v and gate/up each stacked into
one matrix; merged q/k norm weights; RoPE tables). Copies are rebuilt by `refresh()` when the official
weights change (data pointer or version).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.predictor import CodePredictor
from helpers.method.drafters import Drafter, MedusaHeads
from helpers.method.tree import SparseTree


def rms_norm_one_kernel(x: torch.Tensor, weight2: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as one `layer_norm` kernel: [x, -x] has mean 0 and variance mean(x^2), so the first half of its
    layer norm is x / sqrt(mean(x^2) + eps). x [..., H], weight2 = [weight, 0] [2H] -> [..., H] (a view).
    The reference formula (`predictor.rms_norm`) to ~1 ulp; on CPU one kernel instead of several (~3-6 us a norm)."""
    width = x.shape[-1]
    return F.layer_norm(torch.cat((x, -x), -1), (2 * width,), weight2, None, eps)[..., :width]


def _padded(weight: torch.Tensor) -> torch.Tensor:
    """[weight, 0]: a norm weight as `rms_norm_one_kernel` takes it."""
    weight = weight.detach()
    return torch.cat((weight, torch.zeros_like(weight)))


def fusable(drafter: Drafter | None) -> bool:
    """True for drafters whose draft logits are heads (+ offsets) the fused module can compute itself."""
    if drafter is None or any(getattr(type(drafter), name) is not getattr(Drafter, name)
                              for name in ("draft_logits", "draft_input")):
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
        if getattr(p.config, "attention_bias", False):
            raise ValueError("the fused call supports attention_bias=False (as Qwen3-TTS), this model has biases")
        self._signature = None
        self.generation = -1                  # counts rebuilds: steps rebuild their per-t tables when it moves
        self.refresh()

    # ------------------------------------------------------------------ weights
    def _sources(self) -> list[torch.Tensor]:
        p = self.predictor
        heads = [h.weight for h in p.official.lm_head]
        tables = [e.weight for e in p.official.model.codec_embedding]
        layers = [w for layer in p.layers for w in (
            layer.input_layernorm.weight, layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight,
            layer.self_attn.v_proj.weight, layer.self_attn.q_norm.weight, layer.self_attn.k_norm.weight,
            layer.self_attn.o_proj.weight, layer.post_attention_layernorm.weight, layer.mlp.gate_proj.weight,
            layer.mlp.up_proj.weight, layer.mlp.down_proj.weight)]
        return heads + tables + layers + [p.official.model.norm.weight, p.c0_embedding.weight]

    def refresh(self) -> bool:
        """Rebuild the copied tensors if the official weights changed since the last build. Returns rebuilt."""
        sources = self._sources()
        signature = tuple((w.data_ptr(), w._version, w.dtype, w.device) for w in sources)
        if signature == self._signature:
            return False
        p = self.predictor
        dtype, device = p.dtype, p.device
        with torch.no_grad():
            heads = [h.weight.detach().t() for h in p.official.lm_head]
            heads += heads[-1:] * (2 * self.max_depth)      # rows past c15 repeat the last head (clamped index)
            self.register_buffer("heads", torch.stack(heads), persistent=False)             # [15 + 2 Dmax, H, V]
            self.register_buffer("tables", torch.cat([e.weight.detach() for e in p.official.model.codec_embedding]),
                                 persistent=False)                                   # [15 V, H_talker]
            positions = torch.arange(self.slots + self.max_depth + 2, device=device)
            cos, sin = p.official.model.rotary_emb(torch.zeros((), dtype=dtype, device=device), positions[None])
            half = self.hd // 2
            self.register_buffer("cos", cos[0], persistent=False)                   # [P, d]
            self.register_buffer("sin", torch.cat((-sin[0, :, :half], sin[0, :, half:]), -1), persistent=False)
            # projections as x @ W (transposed, contiguous: faster than F.linear for a few rows), q/k/v and
            # gate/up each stacked into one matrix; q/k norm weights merged [nh + nkv, d], q rows carry 1/sqrt(d)
            self.layer_weights = [(
                _padded(layer.input_layernorm.weight),
                torch.cat([m.weight.detach() for m in (a.q_proj, a.k_proj, a.v_proj)]).t().contiguous(),
                torch.cat((a.q_norm.weight.detach().expand(self.nh, -1) * a.scaling,
                           a.k_norm.weight.detach().expand(self.nkv, -1))),
                a.o_proj.weight.detach().t().contiguous(), _padded(layer.post_attention_layernorm.weight),
                torch.cat((layer.mlp.gate_proj.weight.detach(), layer.mlp.up_proj.weight.detach())).t().contiguous(),
                layer.mlp.down_proj.weight.detach().t().contiguous(), layer.mlp.act_fn)
                for layer in p.layers for a in (layer.self_attn,)]
        self._signature = signature
        self.generation += 1
        self.norm_weight = _padded(p.official.model.norm.weight)
        projection = p.official.small_to_mtp_projection                  # talker width -> predictor width
        self.project = None if isinstance(projection, nn.Identity) else projection.forward
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
               k_cache: torch.Tensor, v_cache: torch.Tensor, prenorm: bool = False):
        """x [B, q, H_talker]; cos/sin [q, 1, d] (sin sign-folded); mask [1, q, S + q] additive;
        caches [L, B, kv, S, d] -> hidden [B, q, H] (final norm applied; prenorm: r before it), k_new, v_new
        [L, B, kv, q, d]."""
        batch, q = x.shape[0], x.shape[1]
        nh, nkv, hd = self.nh, self.nkv, self.hd
        groups = nh // nkv
        h = x if self.project is None else self.project(x)
        k_out, v_out = [], []
        for li, (w_in, w_qkv, w_qk, w_o, w_post, w_gate_up, w_down, act) in enumerate(self.layer_weights):
            qkv = torch.matmul(rms_norm_one_kernel(h, w_in, self.eps), w_qkv).view(batch, q, nh + 2 * nkv, hd)
            qk = F.rms_norm(qkv[:, :, :nh + nkv], (hd,), None, self.eps) * w_qk
            qk = qk * cos + torch.roll(qk, hd // 2, -1) * sin                      # RoPE
            qs = qk[:, :, :nh].reshape(batch, q, nkv, groups, hd).permute(0, 2, 3, 1, 4).reshape(
                batch, nkv, groups * q, hd)                                          # [B, kv, g q, d]
            ks = qk[:, :, nh:].transpose(1, 2)                                       # [B, kv, q, d]
            vs = qkv[:, :, nh + nkv:].transpose(1, 2)
            k_out.append(ks)
            v_out.append(vs)
            keys = torch.cat((k_cache[li], ks), dim=2)                               # [B, kv, S + q, d]
            values = torch.cat((v_cache[li], vs), dim=2)
            scores = torch.matmul(qs, keys.transpose(-1, -2)).view(batch, nkv, groups, q, -1) + mask
            probs = torch.softmax(scores, dim=-1, dtype=self.softmax_dtype)          # [B, kv, g, q, S + q]
            if self.softmax_dtype is not None:
                probs = probs.to(values.dtype)
            o = torch.matmul(probs.view(batch, nkv, groups * q, -1), values)         # [B, kv, g q, d]
            h = h + torch.matmul(o.view(batch, nkv, groups, q, hd).permute(0, 3, 1, 2, 4).reshape(batch, q, nh * hd),
                                 w_o)
            gate, up = torch.matmul(rms_norm_one_kernel(h, w_post, self.eps), w_gate_up).chunk(2, dim=-1)
            h = h + torch.matmul(act(gate) * up, w_down)
        return h if prenorm else self.final_norm(h), torch.stack(k_out), torch.stack(v_out)

    def final_norm(self, r: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm: pre-norm residual r [..., H] -> h [..., H]."""
        return rms_norm_one_kernel(r, self.norm_weight, self.eps)

    def prefill(self, g: torch.Tensor, c0: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                prenorm: bool = False):
        """[g, E0(c0)] over an empty cache (zeros, fully masked). g [B, H_talker], c0 [B]
        -> logits of c1 [B, V], k_new, v_new [L, B, kv, 2, d], h_1 [B, H] (prenorm: r_1, before the final norm)."""
        x = torch.cat((g[:, None].to(self.heads.dtype), self.predictor.c0_embedding(c0[:, None])), dim=1)
        state, k, v = self.layers(x, self.prefill_cos, self.prefill_sin, self.prefill_mask, k_cache, v_cache, True)
        r1 = state[:, 1]
        h1 = self.final_norm(r1)
        return torch.matmul(h1, self.heads[0]), k, v, r1 if prenorm else h1

    def step(self, tree: SparseTree | None, drafter: Drafter | None = None) -> "FusedStep":
        """The fused call for `tree` (None: the AR call, q = 1) sharing this core's weights."""
        return FusedStep(self, tree, drafter)


def shared_core(predictor: CodePredictor, max_depth: int = 3) -> FusedCore:
    """The one `FusedCore` of `predictor` (refreshed), reused by its AR call and every decoder built on it.

    Kept as a plain attribute of the predictor, so it lives exactly as long as the predictor (no global cache
    holding weight copies); replaced by a deeper one when a tree needs more than its max_depth (decoders built
    on the old one keep it while they live)."""
    core = predictor.__dict__.get("_fused_core")
    if core is None or core.max_depth < max_depth:
        core = FusedCore(predictor, max_depth=max_depth)
        object.__setattr__(predictor, "_fused_core", core)      # not a registered submodule (no state_dict entry)
    core.refresh()
    return core


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
        self.use_views = True           # eager CPU forward reads `rows`; False: always the gather path (graphs)
        self.register_buffer("medusa_index", (t + torch.arange(self.depth + 1)).clamp(max=n - 1), persistent=False)
        self.medusa = medusa
        self.t_inputs = [torch.tensor([i], device=device) for i in range(n)]        # the `t` input, prebuilt
        self._offsets_source = drafter.offsets if self.fused_drafts and not medusa else None
        self._offsets_key = None
        self.to(device)
        self._tables()

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
                      self._weights(core.heads[t:t + self.window])) for t in range(core.num_codes)]   # rows exist
        self._generation = core.generation

    def _weights(self, heads: torch.Tensor) -> list[torch.Tensor]:
        """What each depth group's tokens read from the head window heads [W, H, V]: rows d..d+D as
        [D+1, H, V] (target and drafts, offsets/reused heads fused) or row d [H, V] (target only)."""
        if self.fused_drafts and not self.medusa:
            return [heads[d:d + self.depth + 1] for d, _, _ in self.groups]
        return [heads[d] for d, _, _ in self.groups]

    def _offsets(self) -> torch.Tensor | None:
        """[0, b_1..b_D] as [D+1, 1, H] (None for reused heads), rebuilt when the drafter's offsets change."""
        b = self._offsets_source
        if b is None:
            return None
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
            logits = torch.matmul(hidden, weights[0])
        else:
            logits = torch.cat([torch.matmul(hidden[:, s:e], w) for (_, s, e), w in zip(self.groups, weights)], dim=1)
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
            logits = torch.cat([torch.matmul(hidden[:, s:e], w) for (_, s, e), w in zip(groups, weights)], dim=1)
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
            both = [torch.bmm(x[:, s:e], w) for (_, s, e), w in zip(groups, weights)]    # w [D+1, H, V]
            both = torch.cat(both, dim=1) if len(both) > 1 else both[0]                    # [D+1, q, V]
            return both[:1], both[1:].topk(self.width, dim=-1).indices.transpose(0, 1)[None]
        return logits, draft.topk(self.width, dim=-1).indices.permute(1, 2, 0, 3)

    def first_drafts(self, h1: torch.Tensor) -> torch.Tensor:
        """Drafts from the prefill's h_1 (the first round's root c_1 as a depth-0 token of a root at t = 0).

        h1 [1, H] (r_1 for a prenorm step: `FusedCore.prefill(prenorm=True)`) -> [1, D, m]."""
        if self._generation != self.core.generation:
            self._tables()
        return self._heads(h1[:, None], self.rows[0][4][:1], self.t_inputs[0], [(0, 0, 1)])[1][:, 0]


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
    prefix: list[bool]            # query index -> its path is 0, 1, .., len - 1 (committed as a slice)
    out_pos: list[int]            # code position each token's output produces
    draft_depth: int              # drafts this round's tree needs (rows of the candidates)
    draft_width: int              # candidates per depth (columns)

    def walk(self, ys: list[int], tokens: list[int]) -> tuple[int, torch.Tensor, list[int]]:
        """Descend from the root while a token's sample ys[i] is one of its children's tokens.

        ys, tokens: per query index -> (stop node, its path [root..node] as an index tensor, the committed
        codes: the accepted tokens then the stop node's sample)."""
        node, taken, children = 0, [], self.children
        while True:
            y = ys[node]
            taken.append(y)
            for c in children[node]:
                if tokens[c] == y:
                    node = c
                    break
            else:
                return node, self.paths[node], taken


def make_plans(core: FusedCore, tree: SparseTree, drafter: Drafter | None,
               prenorm: bool | None = None) -> dict[int, FusedPlan]:
    """One plan per root position t = 1..14: the tree pruned at depth 14 - t and its fused call (prenorm: see
    `FusedStep`)."""
    n = core.num_codes
    device = core.heads.device
    steps: dict[SparseTree | None, FusedStep] = {}
    plans = {}
    for t in range(1, n):
        sub = tree.pruned(n - 1 - t)
        if sub not in steps:
            steps[sub] = FusedStep(core, sub, drafter, prenorm=prenorm)
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
            paths=paths, prefix=[p.tolist() == list(range(len(p))) for p in paths], out_pos=[t + d + 1 for d in depth],
            draft_depth=sub.max_depth if sub is not None else 0,
            draft_width=max(sub.width) if sub is not None else 0)
    return plans
