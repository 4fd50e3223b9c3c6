"""The fused calls' shared weights: copies of the official ones laid out once for few, cheap ops, and the
decoder stack over them (`FusedCore.layers`, `prefill`, `final_norm`). See `helpers.method.fused`."""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.kernels import apply, make_linear


def rms_norm_one_kernel(x: torch.Tensor, weight2: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as one `layer_norm` kernel: [x, -x] has mean 0 and variance mean(x^2), so the first half of its
    layer norm is x / sqrt(mean(x^2) + eps). x [..., H], weight2 = [weight, 0] [2H] -> [..., H] (a view).
    `helpers.method.predictor.rms_norm` to ~1 ulp; on CPU one kernel instead of several (~3-6 us a norm)."""
    width = x.shape[-1]
    return F.layer_norm(torch.cat((x, -x), -1), (2 * width,), weight2, None, eps)[..., :width]


def _padded(weight: torch.Tensor) -> torch.Tensor:
    """[weight, 0]: a norm weight as `rms_norm_one_kernel` takes it."""
    weight = weight.detach()
    return torch.cat((weight, torch.zeros_like(weight)))


class FusedCore(nn.Module):
    """Shared weights and tables of the fused calls of one `helpers.method.predictor.CodePredictor` (all buffers, no
    new parameters; the predictor is read by attribute, so that it can run this stack without an import circle).

    positions: RoPE tables cover positions 0..slots + max_depth + 1 (a root at c_14 plus K deeper nodes).
    kernel: default the predictor's (`CodePredictor.kernel`): the projections and `head_linears` laid out for it
    (`helpers.method.kernels`); `heads` stays dense [15 + 2 Dmax, H, V] for the gathered (traced) call.
    """

    def __init__(self, predictor: nn.Module, max_depth: int = 3, kernel: str | None = None):
        super().__init__()
        self.predictor = predictor
        p = predictor
        self.num_codes, self.slots, self.vocab = p.num_codes, p.slots, p.vocab_size
        self.num_layers, self.nh, self.nkv, self.hd = len(p.layers), p.num_heads, p.num_kv_heads, p.head_dim
        self.max_depth = max_depth
        self.kernel = kernel or predictor.kernel
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
        signature = (self.kernel,) + tuple((w.data_ptr(), w._version, w.dtype, w.device) for w in sources)
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
            cos, sin = self.rope(torch.arange(self.slots + self.max_depth + 2, device=device))
            self.register_buffer("cos", cos, persistent=False)                      # [P, d]
            self.register_buffer("sin", sin, persistent=False)
            # projections laid out for the kernel (dense: x @ W, W transposed and contiguous, faster than F.linear
            # for a few rows), q/k/v and gate/up each stacked into one matrix; q/k norm weights merged
            # [nh + nkv, d], q rows carry 1/sqrt(d)
            kernel = self.kernel
            self.layer_weights = [(
                _padded(layer.input_layernorm.weight),
                make_linear(torch.cat([m.weight.detach() for m in (a.q_proj, a.k_proj, a.v_proj)]), kernel),
                torch.cat((a.q_norm.weight.detach().expand(self.nh, -1) * a.scaling,
                           a.k_norm.weight.detach().expand(self.nkv, -1))),
                make_linear(a.o_proj.weight, kernel), _padded(layer.post_attention_layernorm.weight),
                make_linear(torch.cat((layer.mlp.gate_proj.weight.detach(), layer.mlp.up_proj.weight.detach())),
                            kernel),
                make_linear(layer.mlp.down_proj.weight, kernel), layer.mlp.act_fn)
                for layer in p.layers for a in (layer.self_attn,)]
            # what the eager calls multiply by: the dense heads themselves, or one laid-out linear per head
            # the heads laid out for a non-dense kernel, padded as `heads` (past c15, the last head)
            linears = [make_linear(h.weight, kernel) for h in p.official.lm_head] if kernel != "dense" else []
            self._head_linears = linears + linears[-1:] * (2 * self.max_depth)
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

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The official RoPE tables at positions [P]: cos, sin [P, d] in the model dtype, sin sign-folded (its first
        half negated) so that rotating is `x * cos + roll(x, d / 2) * sin`, as `layers` takes them."""
        p = self.predictor
        cos, sin = p.official.model.rotary_emb(torch.zeros((), dtype=p.dtype, device=p.device), positions[None])
        half = self.hd // 2
        return cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), -1)

    @property
    def head_linears(self) -> torch.Tensor | list:
        """What the eager calls multiply by for head i (row i): the dense `heads` [15 + 2 Dmax, H, V] themselves,
        or the kernel's laid-out linears (a list, as long)."""
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
        for li, (w_in, w_qkv, w_qk, w_o, w_post, w_gate_up, w_down, act) in enumerate(self.layer_weights):
            qkv = apply(rms_norm_one_kernel(h, w_in, self.eps), w_qkv).view(batch, q, nh + 2 * nkv, hd)
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
            h = h + apply(o.view(batch, nkv, groups, q, hd).permute(0, 3, 1, 2, 4).reshape(batch, q, nh * hd), w_o)
            gate, up = apply(rms_norm_one_kernel(h, w_post, self.eps), w_gate_up).chunk(2, dim=-1)
            h = h + apply(act(gate) * up, w_down)
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
        return apply(h1, self.head_linears[0]), k, v, r1 if prenorm else h1

