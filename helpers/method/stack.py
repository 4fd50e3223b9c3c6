"""The decoder stack, written once, and the verify call over it: what the decoders run and a device exports.

`FusedCore(predictor, max_depth)` holds copies of the official weights laid out once for few, cheap ops (stacked
input tables; heads and projections transposed to [in, out], q/k/v and gate/up each stacked into one matrix; merged
q/k norm weights; RoPE tables), rebuilt by `refresh()` when the official weights change (data pointer or version),
and runs the stack over them: `layers`; `query`, any query after a cache; `prefill`, the frame's first call;
`final_norm`. `CodePredictor`'s calls are a face over it (dense kernel); the tests set it against the official
forward and an oracle written over the official modules.

One of each, here: the mask builder `attention_mask` (which keys each token sees; `FusedCore.additive` makes it the
mask the stack adds) for the any-query call, the prefill and `FusedStep`'s per-t tables; the cache `KVCache` (empty
from `FusedCore.empty_cache`) and the KV write `commit_kv`; the prefill `FusedCore.prefill`; the RMSNorm `rms_norm`,
one formula in two layouts, each kept for its numbers (they agree to ~1 ulp): by default torch's `rms_norm`, then the
weight (the oracle, a pre-norm drafter's norm in its master dtype, the per-head q/k norms); `one_kernel`, one
`layer_norm` over [x, -x] (mean 0, variance mean(x^2), so its first half is x / sqrt(mean(x^2) + eps)) for the
stack's norms over the hidden width, on the CPU one kernel instead of several (~3-6 us a norm).

`FusedStep(core, tree)` is the verify call of one tree (tree None: the AR call), one static-shape module:

    forward(tokens [B, q], k [L, B, kv, S, d], v [L, B, kv, S, d], t [1] int)
      -> logits [B, q, V]              target logits at the root and every node (before the sampler)
         k_new, v_new [L, B, kv, q, d] keys/values of the query (the round commits the accepted path's)
         hidden [B, q, H]              (a tree) every token's state, r before the final norm when `prenorm`

`q = N + 1` is the root (`c_t`, the code just sampled) followed by the tree's nodes; `t` is the root's code position
(1..14). Everything that depends on `t` is a row of a buffer indexed by `t` (one `index_select` each, no host read):
the flat embedding-row offset of each token (the 15 input tables `E_1..E_15` stacked into one [15 V, H_talker]
table), RoPE cos/sin of each token (position `t + 1 + depth`), the additive mask over [cache slots, query] (slots
`< t + 1` visible, then the ancestor mask), and the target head of each depth group (nodes at depth `d` all use head
`t + d`, clamped to the last). No Python control flow depends on tensor values and every tensor has rank <= 5.
Near the frame's end a module built on the full tree runs with clamped indices; those nodes' outputs are
meaningless and never accepted.

`ViewStep` is the CPU's eager call: the same call with the root position a host int, its per-t rows read as views
(no head copied per call), running any matrix kernel of `helpers.method.kernels` (the CPU deployments); compiled,
captured, traced and CUDA calls gather. The Core ML export adds drafts from every node (`helpers.method.export_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.kernels import RUNTIMES, Linear, _Prepacked, _W8A8, _W8A16, check_kernel
from helpers.method.tree import SparseTree


def commit_kv(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, k_new: torch.Tensor,
              v_new: torch.Tensor) -> None:
    """The one KV commit: keys/values k_new, v_new [L, B, kv, n, d] into cache slots [n] (a device tensor) of k, v
    [L, B, kv, S, d], in place. The rounds write at fixed offsets with it; `KVCache.commit` appends with it."""
    k.index_copy_(3, slots, k_new)
    v.index_copy_(3, slots, v_new)


@dataclass
class KVCache:
    """Keys/values of a batch of frames: k, v [L, B, kv, S, d], the first `length` slots committed. Unpacks as k, v."""

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0

    @property
    def slots(self) -> int:
        return self.k.shape[3]

    def __iter__(self):
        return iter((self.k, self.v))

    def commit(self, k_new: torch.Tensor, v_new: torch.Tensor) -> None:
        """Append the query's entries k_new/v_new [L, B, kv, q, d] at `length`."""
        n = k_new.shape[3]
        if self.length + n > self.slots:
            raise ValueError(f"cannot commit {n} entries: cache holds {self.length} of {self.slots} slots")
        commit_kv(self.k, self.v, torch.arange(self.length, self.length + n, device=self.k.device), k_new, v_new)
        self.length += n


def causal_mask(q: int, device=None) -> torch.Tensor:
    """[q, q] bool lower-triangular mask (token i sees 0..i)."""
    return torch.ones(q, q, dtype=torch.bool, device=device).tril()


def attention_mask(cache_length: torch.Tensor, query_mask: torch.Tensor, slots: int) -> torch.Tensor:
    """The one mask builder, over (cache slots, query): slots < cache_length [n] (int, on the device) visible, the
    query by query_mask [q, q] (bool: token i sees j) -> visible [n, q, S + q] bool (additive: `FusedCore.additive`)."""
    cache = torch.arange(slots, device=cache_length.device) < cache_length[:, None, None]          # [n, 1, S]
    return torch.cat((cache.expand(-1, query_mask.shape[0], -1),
                      query_mask.to(cache.device).expand(len(cache_length), -1, -1)), dim=-1)


def apply(x: torch.Tensor, linear) -> torch.Tensor:
    """x [..., K] times one laid-out weight -> [..., N]: a dense W^T [K, N] as one 2-D product over the rows (which
    the CPU's GEMM runs faster than a batched product with a broadcast weight), else the kernel's callable
    (`make_linear`)."""
    if not isinstance(linear, torch.Tensor):
        return linear(x)
    return torch.mm(x.reshape(-1, x.shape[-1]), linear).view(*x.shape[:-1], linear.shape[-1])


def layout(kernel: str) -> str:
    """The torch layout of a stack for `kernel`: a runtime's calls are exported from the dense stack."""
    return "dense" if kernel in RUNTIMES else kernel


def make_linear(weight: torch.Tensor, kernel: str) -> Linear | torch.Tensor:
    """W [N, K] laid out for `kernel` (`helpers.method.kernels`): for "dense" the tensor W^T [K, N] (contiguous;
    `apply` multiplies), else the kernel's callable x [..., K] -> [..., N]."""
    if kernel == "dense":
        return weight.detach().t().contiguous()
    check_kernel(kernel, weight.dtype, weight.device)
    return {"prepacked": _Prepacked, "w8a16": _W8A16, "w8a8": _W8A8}[kernel](weight)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, one_kernel: bool = False) -> torch.Tensor:
    """The one RMSNorm (module docstring): x [..., H] -> weight * x / sqrt(mean(x^2) + eps), reduced in at least
    float32, weight [H] or None; one_kernel: as one `layer_norm` over [x, -x], weight `padded(w)` [2H] (a view)."""
    if one_kernel and not torch.onnx.is_in_onnx_export():     # exported: the runtime's own RMSNorm op
        return F.layer_norm(torch.cat((x, -x), -1), (2 * x.shape[-1],), weight, None, eps)[..., :x.shape[-1]]
    y = F.rms_norm(x, x.shape[-1:], None, eps)
    return y if weight is None else weight[:x.shape[-1]] * y


def padded(weight: torch.Tensor) -> torch.Tensor:
    """[weight, 0] [2H]: a norm weight [H] as the one_kernel layout of `rms_norm` takes it."""
    weight = weight.detach()
    return torch.cat((weight, torch.zeros_like(weight)))


class LayerWeights(NamedTuple):
    """One decoder layer as `FusedCore.layers` reads it (built by `FusedCore._build`; unpacks as a tuple). A projection
    is laid out for the kernel (`make_linear`: dense W^T [in, out], else the kernel's callable); H the width, I the
    MLP's."""

    input_norm: torch.Tensor                        # [2H] the input RMSNorm's weight, `padded`
    qkv_proj: torch.Tensor | Linear                 # H -> (nh + 2 kv) d: q, k, v stacked
    qk_norm: torch.Tensor                           # [nh + kv, d] per-head q/k norm weights, q rows times 1/sqrt(d)
    o_proj: torch.Tensor | Linear                   # nh d -> H
    post_attention_norm: torch.Tensor               # [2H] the post-attention RMSNorm's weight, `padded`
    gate_up_proj: torch.Tensor | Linear             # H -> 2I: gate, up stacked
    down_proj: torch.Tensor | Linear                # I -> H
    act_fn: Callable[[torch.Tensor], torch.Tensor]  # the MLP's activation (on gate)

    @property
    def projections(self) -> tuple:
        """The layer's four matrix products in call order: qkv_proj, o_proj, gate_up_proj, down_proj."""
        return self.qkv_proj, self.o_proj, self.gate_up_proj, self.down_proj


class FusedCore(nn.Module):
    """Shared weights and tables of the fused calls of one `helpers.method.predictor.CodePredictor` (all buffers, no
    new parameters; the predictor is read by attribute, so that it can run this stack without an import circle).

    max_depth: the deepest tree its calls take (default 14, any), its RoPE tables covering positions
    0..slots + max_depth + 1 (a root at c_14 plus that many deeper nodes).
    kernel: default the predictor's (`CodePredictor.kernel`): the projections and `head_linears` laid out for it
    (`helpers.method.kernels`; the CPU's eager calls, `ViewStep`); `heads` stays dense [15, H, V] for
    the gathered call.
    """

    def __init__(self, predictor: nn.Module, max_depth: int | None = None, kernel: str | None = None):
        super().__init__()
        self.predictor = predictor
        p = predictor
        self.num_codes, self.slots, self.vocab = p.num_codes, p.slots, p.vocab_size
        self.num_layers, self.nh, self.nkv, self.hd = (len(p.official.model.layers), p.num_heads, p.num_kv_heads,
                                                       p.head_dim)
        self.max_depth = p.num_codes - 1 if max_depth is None else max_depth
        self.kernel = layout(kernel or predictor.kernel)          # a runtime's stack: dense, its calls exported
        self.eps = p.official.model.layers[0].self_attn.q_norm.variance_epsilon
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
        layers = [w for layer in p.official.model.layers for w in (
            layer.input_layernorm.weight, layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight,
            layer.self_attn.v_proj.weight, layer.self_attn.q_norm.weight, layer.self_attn.k_norm.weight,
            layer.self_attn.o_proj.weight, layer.post_attention_layernorm.weight, layer.mlp.gate_proj.weight,
            layer.mlp.up_proj.weight, layer.mlp.down_proj.weight)]
        return heads + tables + layers + [p.official.model.norm.weight, p.c0_embedding.weight]

    def refresh(self) -> bool:
        """Rebuild the copied tensors if the official weights changed since the last build. Returns rebuilt."""
        sources = self._sources()
        signature = (self.kernel,) + tuple((w.data_ptr(), w._version, w.dtype, w.device) for w in sources)
        if signature == self._signature:
            return False
        self._build()
        self._signature = signature
        self.generation += 1
        return True

    def _build(self) -> None:
        """Copy the official weights, laid out as the class docstring says, and the tables made from them."""
        p = self.predictor
        dtype, device = p.dtype, p.device
        with torch.no_grad():
            heads = [h.weight.detach().t() for h in p.official.lm_head]
            self.register_buffer("heads", torch.stack(heads), persistent=False)             # [15, H, V]
            self.register_buffer("tables", torch.cat([e.weight.detach() for e in p.official.model.codec_embedding]),
                                 persistent=False)                                   # [15 V, H_talker]
            cos, sin = self.rope(torch.arange(self.slots + self.max_depth + 2, device=device))
            self.register_buffer("cos", cos, persistent=False)                      # [P, d]
            self.register_buffer("sin", sin, persistent=False)
            # one `LayerWeights` a layer, its projections laid out for the kernel (dense: x @ W, W transposed and
            # contiguous, faster than F.linear for a few rows)
            kernel = self.kernel
            self.layer_weights = [LayerWeights(
                input_norm=padded(layer.input_layernorm.weight),
                qkv_proj=make_linear(torch.cat([m.weight.detach() for m in (a.q_proj, a.k_proj, a.v_proj)]),
                                     kernel),
                qk_norm=torch.cat((a.q_norm.weight.detach().expand(self.nh, -1) * a.scaling,
                                   a.k_norm.weight.detach().expand(self.nkv, -1))),
                o_proj=make_linear(a.o_proj.weight, kernel),
                post_attention_norm=padded(layer.post_attention_layernorm.weight),
                gate_up_proj=make_linear(torch.cat((layer.mlp.gate_proj.weight.detach(),
                                                    layer.mlp.up_proj.weight.detach())), kernel),
                down_proj=make_linear(layer.mlp.down_proj.weight, kernel), act_fn=layer.mlp.act_fn)
                for layer in p.official.model.layers for a in (layer.self_attn,)]
            # the heads laid out for a non-dense kernel (the eager calls of `ViewStep`)
            self._head_linears = [make_linear(h.weight, kernel) for h in p.official.lm_head] if kernel != "dense" else []
        self.norm_weight = padded(p.official.model.norm.weight)
        projection = p.official.small_to_mtp_projection                  # talker width -> predictor width
        self.project = None if isinstance(projection, nn.Identity) else projection.forward
        self.mask_min = max(torch.finfo(dtype).min, -3.0e4)   # exp() underflows to 0 in any dtype; finite in fp16
        self.softmax_dtype = None if dtype in (torch.float32, torch.float64) else torch.float32
        self.prefill_cos, self.prefill_sin = self.cos[:2, None], self.sin[:2, None]   # [g, c0] at slots 0, 1
        self.prefill_mask = self.additive(attention_mask(torch.zeros(1, dtype=torch.long, device=device),
                                                         causal_mask(2, device), self.slots))

    def empty_cache(self, batch: int) -> KVCache:
        """The empty cache of `batch` frames: zero k, v [L, batch, kv, S, d] in the model's dtype, on its device."""
        shape = (self.num_layers, batch, self.nkv, self.slots, self.hd)
        return KVCache(*(torch.zeros(shape, dtype=self.heads.dtype, device=self.heads.device) for _ in range(2)))

    def additive(self, visible: torch.Tensor) -> torch.Tensor:
        """`attention_mask`'s visible [..., q, S + q] as the stack adds it: 0 there, else `mask_min` (model dtype)."""
        return torch.zeros_like(visible, dtype=self.cos.dtype).masked_fill(~visible, self.mask_min)     # on its device

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The official RoPE tables at positions [P]: cos, sin [P, d] in the model dtype, sin sign-folded (its first
        half negated) so that rotating is `x * cos + roll(x, d / 2) * sin`, as `layers` takes them."""
        p = self.predictor
        cos, sin = p.official.model.rotary_emb(torch.zeros((), dtype=p.dtype, device=p.device), positions[None])
        half = self.hd // 2
        return cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), -1)

    @property
    def head_linears(self) -> torch.Tensor | list:
        """What the eager calls multiply by for head i (row i): the dense `heads` [15, H, V] themselves, or the
        kernel's laid-out linears (a list, as long)."""
        return self.heads if self.kernel == "dense" else self._head_linears

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
        for li, w in enumerate(self.layer_weights):
            normed = rms_norm(h, w.input_norm, self.eps, one_kernel=True)
            qkv = apply(normed, w.qkv_proj).view(batch, q, nh + 2 * nkv, hd)
            qk = rms_norm(qkv[:, :, :nh + nkv], None, self.eps) * w.qk_norm
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
            h = h + apply(o.view(batch, nkv, groups, q, hd).permute(0, 3, 1, 2, 4).reshape(batch, q, nh * hd),
                          w.o_proj)
            gate, up = apply(rms_norm(h, w.post_attention_norm, self.eps, one_kernel=True),
                             w.gate_up_proj).chunk(2, dim=-1)
            h = h + apply(w.act_fn(gate) * up, w.down_proj)
        return h if prenorm else self.final_norm(h), torch.stack(k_out), torch.stack(v_out)

    def final_norm(self, r: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm: pre-norm residual r [..., H] -> h [..., H]."""
        return rms_norm(r, self.norm_weight, self.eps, one_kernel=True)

    def query(self, cache: KVCache, x: torch.Tensor, query_mask: torch.Tensor, depth: torch.Tensor,
              prenorm: bool = False):
        """The stack at any query, placed after the cache's committed slots (cache unchanged): x [B, q, H_talker],
        query_mask [q, q] bool (token i sees token j), depth [q] (each token's offset after the cache: its RoPE
        position is length + depth) -> hidden [B, q, H] (prenorm: r), k_new, v_new [L, B, kv, q, d]."""
        device = self.cos.device
        cos, sin = self.rope(cache.length + depth.to(device))                                 # [q, d] each
        visible = attention_mask(torch.tensor([cache.length], device=device), query_mask, self.slots)
        return self.layers(x, cos[:, None], sin[:, None], self.additive(visible), cache.k, cache.v, prenorm)

    def prefill(self, g: torch.Tensor, c0: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                prenorm: bool = False):
        """The one prefill: [g, E0(c0)] at slots 0, 1 over an empty cache (zeros, fully masked). g [B, H_talker], c0 [B]
        -> logits of c1 [B, V], k_new, v_new [L, B, kv, 2, d], h_1 [B, H] (prenorm: r_1, before the final norm)."""
        x = torch.cat((g[:, None].to(self.heads.dtype), self.predictor.c0_embedding(c0[:, None])), dim=1)
        state, k, v = self.layers(x, self.prefill_cos, self.prefill_sin, self.prefill_mask, k_cache, v_cache, True)
        r1 = state[:, 1]
        h1 = self.final_norm(r1)
        return apply(h1, self.head_linears[0]), k, v, r1 if prenorm else h1


class FusedStep(nn.Module):
    """The verify call of one tree (tree None: the AR call), see the module docstring. prenorm: a tree call's
    `hidden` is r, before the final norm (what a prenorm drafter reads; the target rows use norm(r) = h)."""

    def __init__(self, core: FusedCore, tree: SparseTree | None, prenorm: bool = False):
        super().__init__()
        self.core, self.tree = core, tree
        n = core.num_codes
        depth = tree.depth_list if tree is not None else [0]
        self.q = len(depth)
        self.depth = max(depth)                                                      # D
        if self.depth > core.max_depth:
            raise ValueError(f"tree depth {self.depth} exceeds the core's max_depth={core.max_depth}")
        self.prenorm = bool(prenorm) and self.depth > 0
        # depth groups: nodes are sorted by depth, so depth d occupies query[start_d:end_d]
        self.groups = [(d, depth.index(d), len(depth) - depth[::-1].index(d)) for d in range(self.depth + 1)]
        device = core.heads.device
        d = torch.tensor(depth, device=device)
        t = torch.arange(n, device=device)[:, None]                                  # rows: root position t
        # code position of each token t + d -> row offset of its table E_{t+d} in the stacked tables
        self.register_buffer("emb_offset", ((t + d).clamp(1, n) - 1) * core.vocab, persistent=False)   # [15, q]
        self.register_buffer("position", t + 1 + d, persistent=False)                # [15, q] RoPE positions
        tree_mask = tree.mask if tree is not None else torch.ones(1, 1, dtype=torch.bool, device=device)
        self.register_buffer("visible", attention_mask(t[:, 0] + 1, tree_mask, core.slots), persistent=False)
        self.register_buffer("head_index", (t + torch.arange(self.depth + 1, device=device)).clamp(max=n - 1),
                             persistent=False)                                        # [15, D + 1]: target heads
        self.tables()

    def tables(self) -> None:
        """Per-t float tables in the model dtype, cos/sin [15, q, 1, d] and the additive mask [15, 1, q, S + q],
        built again when the core's weights were rebuilt (`FusedCore.generation`: its dtype or device may differ)."""
        core = self.core
        if self.visible.device != core.heads.device:               # the model moved since this step was built
            self.to(core.heads.device)
        self.cos_t, self.sin_t = core.cos[self.position][:, :, None], core.sin[self.position][:, :, None]
        self.mask_t = core.additive(self.visible)[:, None]
        self.generation = core.generation

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("logits", "k_new", "v_new") + (("hidden",) if self.tree is not None else ())

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
        """The call at root position t [1]: every t-dependent row gathered by `index_select` (kernel 'dense'), so
        one graph serves every t."""
        core = self.core
        if core.kernel != "dense":
            raise ValueError(f"kernel {core.kernel!r} runs in the CPU's eager call (`ViewStep`); "
                             "the gathered call (tracing, export, compilation, CUDA) needs kernel 'dense'")
        if self.generation != core.generation:
            self.tables()
        t = t.reshape(1)
        emb_offset = self.emb_offset.index_select(0, t)
        cos, sin = self.cos_t.index_select(0, t)[0], self.sin_t.index_select(0, t)[0]
        mask = self.mask_t.index_select(0, t)[0]                                           # [1, q, S + q]
        heads = core.heads.index_select(0, self.head_index.index_select(0, t)[0])         # [D + 1, H, V]
        return self.call(tokens, k_cache, v_cache, emb_offset, cos, sin, mask,
                         [heads[i] for i in range(self.depth + 1)])

    def call(self, tokens, k_cache, v_cache, emb_offset, cos, sin, mask, heads):
        """The call over one root position's rows: heads, the target head of each depth group ([H, V] dense rows
        or the kernel's linears)."""
        state, k_new, v_new = self.states(tokens, k_cache, v_cache, emb_offset, cos, sin, mask)
        logits = self.logits(state, heads)
        if self.tree is None:
            return logits, k_new, v_new
        return logits, k_new, v_new, state

    def states(self, tokens, k_cache, v_cache, emb_offset, cos, sin, mask):
        """The layers: tokens [B, q] -> states [B, q, H] (h, or r when `prenorm`), k_new, v_new [L, B, kv, q, d]."""
        x = F.embedding(tokens + emb_offset, self.core.tables)                            # [B, q, H_talker]
        return self.core.layers(x, cos, sin, mask, k_cache, v_cache, self.prenorm)

    def logits(self, state: torch.Tensor, heads) -> torch.Tensor:
        """The target heads: states [B, q, H] -> logits [B, q, V], each depth group by its head."""
        hidden = self.core.final_norm(state) if self.prenorm else state
        logits = [apply(hidden[:, s:e], w) for (_, s, e), w in zip(self.groups, heads)]    # per depth group
        return logits[0] if len(logits) == 1 else torch.cat(logits, dim=1)                # [B, q, V]


class ViewStep(FusedStep):
    """`FusedStep` at a host int t: forward(tokens, k, v, t [1] on the CPU) reads int(t) (a host read, so never
    captured) and calls `call_at`."""

    def tables(self) -> None:
        """`FusedStep.tables`, and `rows[t]`: everything a call at root position t reads, as views, with each depth
        group's head (the dense rows or the kernel's linears; past c15, the last)."""
        super().tables()
        core, n = self.core, self.core.num_codes
        self.rows = [(self.emb_offset[t], self.cos_t[t], self.sin_t[t], self.mask_t[t],
                      [core.head_linears[min(t + d, n - 1)] for d, _, _ in self.groups]) for t in range(n)]

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor):
        return self.call_at(tokens, k_cache, v_cache, int(t))

    def call_at(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: int):
        """The call at root position t (a host int)."""
        if self.generation != self.core.generation:
            self.tables()
        return self.call(tokens, k_cache, v_cache, *self.rows[t])
