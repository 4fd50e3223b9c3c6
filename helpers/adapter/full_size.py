"""The trained miniature at the real code predictor's size, its function unchanged: the method's regime, measured.

A 1.6M-parameter code predictor is bound by overheads, not by moving weights, so it cannot show what speculation
buys where a call costs its weights' bytes. `full_size(talker)` embeds the miniature's code predictor into an
official `qwen_tts` talker whose code predictor has the real 0.6B shape (`adapter.tiny.QWEN3_TTS_0_6B`: hidden 1024,
5 layers, 16 query / 8 key-value heads of 128, MLP 3072), so that it computes the same logits at the real shape's
cost. With H_s, d_s the miniature's hidden size and head dim, H, d the real ones, c = sqrt(H / H_s), s = sqrt(d / d_s):

- every new row and column is zero; the added layers add nothing (their output and down projections are zero);
- the residual stream is scaled by c: the input tables (E0 and the 15 codec tables) and g times c, each output and
  down projection times c, the three RMSNorm weights divided by c, so every norm sees the same mean square (same
  epsilon) and hands the layers the miniature's normed vector, zero-padded;
- q and k projections times s and the k-norm weight divided by s: each head's norm sees the same mean square and
  the scores keep their scale (1 / sqrt(d) = 1 / (s sqrt(d_s)));
- head-dim pair i of the miniature goes to pair i * d / d_s, which has the same rotary frequency (the miniature's
  rope_theta is kept); query head i goes to i // g_s * g + i % g_s (g_s, g: query heads per key-value head), so
  each keeps its key-value head;
- the heads read the padded state unchanged: the vocabulary stays the miniature's (256; the real one is 2048).

Drafters follow (`FullSize.drafter`): a parameter read beside the hidden state (post-norm offsets, Medusa heads) is
zero-padded; a pre-norm offset lives in the residual stream and is scaled by c too. In float64 the logits, drafts and
codes equal the miniature's (tests/test_full_size.py); `FullSize.lift(g)` maps the talker's hidden states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from helpers.adapter.global_rng import global_rng
from helpers.method.drafters import Drafter, make_drafter
from helpers.method.predictor import CodePredictor


@dataclass(frozen=True)
class FullSize:
    """A miniature embedded at a bigger shape: `talker` (official, its code predictor at that shape), the residual
    scale c (`scale`) and the miniature's hidden size (`small_hidden`)."""

    talker: torch.nn.Module                    # an official Qwen3TTSTalkerForConditionalGeneration
    scale: float
    small_hidden: int

    @property
    def hidden_size(self) -> int:
        return self.talker.config.hidden_size

    def lift(self, g: torch.Tensor) -> torch.Tensor:
        """The miniature's talker hidden states g [F, H_s] as the full-size inner loop reads them: [F, H], padded
        with zeros and times c."""
        if g.shape[-1] != self.small_hidden:
            raise ValueError(f"g has width {g.shape[-1]}; the miniature's talker width is {self.small_hidden}")
        out = torch.zeros(*g.shape[:-1], self.hidden_size, dtype=g.dtype, device=g.device)
        out[..., :self.small_hidden] = g * self.scale
        return out

    def drafter(self, small: Drafter, predictor: CodePredictor) -> Drafter:
        """The miniature's trained drafter `small` beside `predictor` (a full-size `CodePredictor` of `talker`, any
        dtype and device): its parameters' last dimension (the hidden state's) zero-padded, times c for a pre-norm
        drafter (its offsets live in the residual stream)."""
        big = make_drafter(small.kind, predictor, small.depth)
        factor = self.scale if small.prenorm else 1.0
        state = {}
        for name, p in small.state_dict().items():
            x = torch.zeros(*p.shape[:-1], self.hidden_size, dtype=p.dtype, device=p.device)
            x[..., :self.small_hidden] = p * factor
            state[name] = x
        big.load_state_dict(state)
        return big.to(predictor.device)


def head_dim_map(small: int, big: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[small] the big head's dimension that takes each of the small head's dims: pair i (dims i, i + small/2, as
    the rotary embedding pairs them) goes to pair i * big / small, which has the same rotary frequency."""
    r, half, big_half = big // small, small // 2, big // 2
    i = torch.arange(small, device=device)
    return (i % half) * r + (i // half) * big_half


def check_shape(config, shape) -> None:
    """Refuse, by name, a shape the miniature (code predictor `config`) does not embed into."""
    def fail(what):
        raise ValueError(f"the miniature (hidden {config.hidden_size}, {config.num_hidden_layers} layers, heads "
                         f"{config.num_attention_heads}/{config.num_key_value_heads} of {config.head_dim}, MLP "
                         f"{config.intermediate_size}) does not embed into this shape: {what}")

    for name, small, big in (("hidden size", config.hidden_size, shape.hidden_size),
                             ("layers", config.num_hidden_layers, shape.num_layers),
                             ("MLP width", config.intermediate_size, shape.intermediate_size or 0),
                             ("query heads", config.num_attention_heads, shape.num_heads),
                             ("key-value heads", config.num_key_value_heads, shape.num_kv_heads)):
        if big < small:
            fail(f"{name} {big} < the miniature's {small}")
    if shape.head_dim % config.head_dim:
        fail(f"head dim {shape.head_dim} is not a multiple of the miniature's {config.head_dim}")
    if shape.num_heads % shape.num_kv_heads:
        fail(f"{shape.num_heads} query heads do not divide into {shape.num_kv_heads} key-value groups")
    if shape.num_heads // shape.num_kv_heads < config.num_attention_heads // config.num_key_value_heads:
        fail(f"groups of {shape.num_heads // shape.num_kv_heads} query heads per key-value head, fewer than the "
             f"miniature's {config.num_attention_heads // config.num_key_value_heads}")
    if shape.talker_hidden_size != shape.hidden_size:
        fail(f"talker width {shape.talker_hidden_size} differs from hidden size {shape.hidden_size} (a projection)")


def full_size(talker: torch.nn.Module, shape=None) -> FullSize:
    """The miniature `talker`'s code predictor embedded at `shape` (an `adapter.tiny.TinyTalkerSpec`; default
    `QWEN3_TTS_0_6B`, the real 0.6B code predictor's; see the module docstring), in an official talker of that width
    in the miniature's dtype (its own layers, one, are not part of the inner loop: a fixed random init). Seconds.
    (`qwen_tts` is imported here, not with the module: importing it prints banners a notebook silences first.)"""
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerForConditionalGeneration

    from helpers.adapter.tiny import QWEN3_TTS_0_6B

    shape = QWEN3_TTS_0_6B if shape is None else shape
    small_cp, small_e0 = talker.code_predictor, talker.get_input_embeddings()
    cfg = small_cp.config
    check_shape(cfg, shape)
    if talker.config.hidden_size != cfg.hidden_size:
        raise ValueError(f"the miniature's talker width {talker.config.hidden_size} differs from its code "
                         f"predictor's {cfg.hidden_size} (a projection): not supported")
    config = talker.config.to_dict()
    config["code_predictor_config"] = {**config["code_predictor_config"], **dict(
        hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads, head_dim=shape.head_dim,
        layer_types=["full_attention"] * shape.num_layers)}
    config.update(hidden_size=shape.hidden_size, num_hidden_layers=1)
    dtype = small_e0.weight.dtype
    with global_rng(0), torch.device(small_e0.weight.device):
        big = Qwen3TTSTalkerForConditionalGeneration(Qwen3TTSTalkerConfig(**config)).eval().to(dtype)
    scale = _embed(small_cp, small_e0, big.code_predictor, big.get_input_embeddings())
    return FullSize(big, scale, cfg.hidden_size)


@torch.no_grad()
def _embed(small, small_e0, big, big_e0) -> float:
    """Write the small code predictor (official module) and its E0 into the big ones, in place. -> c."""
    s_cfg, b_cfg = small.config, big.config
    h = s_cfg.hidden_size
    c = math.sqrt(b_cfg.hidden_size / h)
    s_qk = math.sqrt(b_cfg.head_dim / s_cfg.head_dim)
    dims = head_dim_map(s_cfg.head_dim, b_cfg.head_dim, big_e0.weight.device)
    g_s = s_cfg.num_attention_heads // s_cfg.num_key_value_heads
    g_b = b_cfg.num_attention_heads // b_cfg.num_key_value_heads
    q_heads = [i // g_s * g_b + i % g_s for i in range(s_cfg.num_attention_heads)]
    q_rows = torch.cat([j * b_cfg.head_dim + dims for j in q_heads])
    kv_rows = torch.cat([j * b_cfg.head_dim + dims for j in range(s_cfg.num_key_value_heads)])
    inter = s_cfg.intermediate_size
    for p in big.parameters():
        p.zero_()
    big_e0.weight.zero_()
    for sl, bl in zip(small.model.layers, big.model.layers):
        sa, ba = sl.self_attn, bl.self_attn
        ba.q_proj.weight[q_rows, :h] = sa.q_proj.weight * s_qk
        ba.k_proj.weight[kv_rows, :h] = sa.k_proj.weight * s_qk
        ba.v_proj.weight[kv_rows, :h] = sa.v_proj.weight
        ba.q_norm.weight[dims] = sa.q_norm.weight
        ba.k_norm.weight[dims] = sa.k_norm.weight / s_qk
        ba.o_proj.weight[:h, q_rows] = sa.o_proj.weight * c
        for name in ("input_layernorm", "post_attention_layernorm"):
            getattr(bl, name).weight[:h] = getattr(sl, name).weight / c
        bl.mlp.gate_proj.weight[:inter, :h] = sl.mlp.gate_proj.weight
        bl.mlp.up_proj.weight[:inter, :h] = sl.mlp.up_proj.weight
        bl.mlp.down_proj.weight[:h, :inter] = sl.mlp.down_proj.weight * c
    big.model.norm.weight[:h] = small.model.norm.weight / c
    for st, bt in zip(small.model.codec_embedding, big.model.codec_embedding):
        bt.weight[:, :h] = st.weight * c
    for sh, bh in zip(small.lm_head, big.lm_head):
        bh.weight[:, :h] = sh.weight
    big_e0.weight[:, :h] = small_e0.weight * c
    return c
