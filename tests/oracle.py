"""The tests' oracle: the code predictor's decoder stack written over the official modules as they are.

`CodePredictor` runs the project's one decoder stack (`helpers.method.stack.FusedCore.layers`, weight copies
laid out for few ops). This is the same computation in the plainest form (the official modules' own projections,
norms per head, RoPE by `rotate_half`), with RMSNorm and softmax in at least float32, so that the tests can set the
stack against an independent writing of it at any query, mask and cache: `reference_forward`, and `query` /
`prefill` / `final_norm` as `CodePredictor.forward_query` / `prefill` / `final_norm` take them.
"""

from __future__ import annotations

import torch

from helpers.method.predictor import CodePredictor
from helpers.method.stack import KVCache, attention_mask, causal_mask, rms_norm


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def reference_forward(cp: CodePredictor, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                      k_cache: torch.Tensor, v_cache: torch.Tensor, prenorm: bool = False):
    """The stack over the official modules. x [B, q, H_talker], positions [q], mask [1, q, S + q] additive,
    caches [L, B, kv, S, d] -> hidden [B, q, H] (prenorm: r), k_new, v_new [L, B, kv, q, d]."""
    batch, q, _ = x.shape
    official = cp.official
    h = official.small_to_mtp_projection(x)
    cos, sin = official.model.rotary_emb(h, positions[None])
    cos, sin = cos[:, None], sin[:, None]                                    # [1, 1, q, d]
    groups = cp.num_heads // cp.num_kv_heads
    k_out, v_out = [], []
    for li, layer in enumerate(cp.layers):
        attn = layer.self_attn
        eps = attn.q_norm.variance_epsilon
        a = rms_norm(h, layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
        qs = rms_norm(attn.q_proj(a).view(batch, q, cp.num_heads, cp.head_dim), attn.q_norm.weight, eps)
        ks = rms_norm(attn.k_proj(a).view(batch, q, cp.num_kv_heads, cp.head_dim), attn.k_norm.weight, eps)
        vs = attn.v_proj(a).view(batch, q, cp.num_kv_heads, cp.head_dim).transpose(1, 2)
        qs, ks = qs.transpose(1, 2), ks.transpose(1, 2)                      # [B, heads, q, d]
        qs = qs * cos + rotate_half(qs) * sin
        ks = ks * cos + rotate_half(ks) * sin
        k_out.append(ks)
        v_out.append(vs)
        keys = torch.cat((k_cache[li], ks), dim=2)                           # [B, kv, S + q, d]
        values = torch.cat((v_cache[li], vs), dim=2)
        qg = qs.reshape(batch, cp.num_kv_heads, groups, q, cp.head_dim)
        scores = torch.matmul(qg, keys[:, :, None].transpose(-1, -2)) * attn.scaling + mask
        probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
        o = torch.matmul(probs.to(values.dtype), values[:, :, None])         # [B, kv, g, q, d]
        o = o.reshape(batch, cp.num_heads, q, cp.head_dim).transpose(1, 2).reshape(batch, q, -1)
        h = h + attn.o_proj(o)
        h = h + layer.mlp(rms_norm(h, layer.post_attention_layernorm.weight,
                                   layer.post_attention_layernorm.variance_epsilon))
    return h if prenorm else final_norm(cp, h), torch.stack(k_out), torch.stack(v_out)


def final_norm(cp: CodePredictor, r: torch.Tensor) -> torch.Tensor:
    """`CodePredictor.final_norm` over the official norm: r [..., H] -> h [..., H]."""
    norm = cp.official.model.norm
    return rms_norm(r, norm.weight, norm.variance_epsilon)


@torch.no_grad()
def query(cp: CodePredictor, cache: KVCache, x: torch.Tensor, query_mask: torch.Tensor,
          depth: torch.Tensor | None = None, prenorm: bool = False):
    """`CodePredictor.forward_query` by the oracle: query x [B, q, H_talker] after the committed slots, cache
    unchanged; depth [q] (default 0..q-1) -> hidden [B, q, H], k_new, v_new [L, B, kv, q, d]."""
    if depth is None:
        depth = torch.arange(x.shape[1], device=cp.device)
    mask = cp.stack.additive(attention_mask(torch.tensor([cache.length], device=cp.device), query_mask, cp.slots))
    return reference_forward(cp, x, cache.length + depth.to(cp.device), mask, cache.k, cache.v, prenorm)


@torch.no_grad()
def prefill(cp: CodePredictor, cache: KVCache, g: torch.Tensor, c0: torch.Tensor, prenorm: bool = False):
    """`CodePredictor.prefill` by the oracle: [g, E0(c0)] committed to an empty cache -> h_1 [B, H] (prenorm: r_1)."""
    x = torch.cat((g[:, None].to(cp.dtype), cp.embed(c0[:, None], [0])), dim=1)
    hidden, k_new, v_new = query(cp, cache, x, causal_mask(2, cp.device), prenorm=prenorm)
    cache.commit(k_new, v_new)
    return hidden[:, 1]
