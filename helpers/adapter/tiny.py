"""Tiny random Qwen3-TTS talkers built from the official `qwen_tts` classes.

Used by tests, the demo and docs: same classes as the real checkpoint, small enough for a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.adapter.global_rng import global_rng


@dataclass(frozen=True)
class TinyTalkerSpec:
    """Sizes of a tiny talker and its code predictor (the real 0.6B: 1024/5/16/8/128/2048)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int = 16
    vocab_size: int = 64
    talker_hidden_size: int = 64
    talker_vocab_size: int = 80
    num_code_groups: int = 16
    logit_scale: float = 1.0
    position_ramp: float = 0.0
    intermediate_size: int | None = None        # default 2 x hidden_size (the real 0.6B: 3072)

    def code_predictor_config(self) -> dict:
        return dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size or 2 * self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            num_code_groups=self.num_code_groups,
            max_position_embeddings=64,
        )


# The code predictor of Qwen3-TTS-12Hz-0.6B-CustomVoice (scripts/data/qwen3_tts_0.6b_customvoice/config.json,
# talker_config and its code_predictor_config): the exact shape, for timing with random weights.
QWEN3_TTS_0_6B = TinyTalkerSpec(hidden_size=1024, num_layers=5, num_heads=16, num_kv_heads=8, head_dim=128,
                                vocab_size=2048, talker_hidden_size=1024, talker_vocab_size=3072, num_code_groups=16,
                                intermediate_size=3072)


def build_tiny_talker(spec: TinyTalkerSpec = TinyTalkerSpec(), seed: int = 0,
                      dtype: torch.dtype = torch.float64):
    """A randomly initialised official talker (with its code predictor), in eval mode.

    `logit_scale` multiplies the code predictor's LM heads so that the target distributions are
    peaked enough for temperature and top-k to matter (random init gives near-uniform logits).
    `position_ramp` adds `i * m` (one random direction m of that norm) to every row of input table
    `E_i`: a systematic drift of the hidden state along the frame, the structure that position-aware
    offsets exist to undo. With 0 the drafts of a random model carry almost no signal.
    """
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerConfig     # here, not with the module:
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerForConditionalGeneration  # its banners

    config = Qwen3TTSTalkerConfig(
        code_predictor_config=spec.code_predictor_config(),
        vocab_size=spec.talker_vocab_size,
        hidden_size=spec.talker_hidden_size,
        intermediate_size=2 * spec.talker_hidden_size,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=spec.talker_hidden_size // 4,
        text_hidden_size=32,
        text_vocab_size=32,
        num_code_groups=spec.num_code_groups,
        rope_scaling={"rope_type": "default", "mrope_section": [2, 1, 1], "interleaved": True},
    )
    with global_rng(seed), torch.no_grad():        # the official init draws from the global RNG
        talker = Qwen3TTSTalkerForConditionalGeneration(config).eval()
        for head in talker.code_predictor.lm_head:
            head.weight.mul_(spec.logit_scale)
        if spec.position_ramp:
            m = torch.randn(spec.talker_hidden_size)
            m = m / m.norm() * spec.position_ramp
            for i, table in enumerate(talker.code_predictor.model.codec_embedding, start=1):
                table.weight.add_(i * m)
    return talker.to(dtype)


def random_frame_inputs(talker_hidden_size: int, talker_vocab_size: int, n: int, generator: torch.Generator,
                        dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Stand-ins for the talker's outputs: g [n, H_talker] ~ N(0, 1) and c0 [n] uniform."""
    g = torch.randn(n, talker_hidden_size, generator=generator, dtype=torch.float64).to(dtype)
    c0 = torch.randint(0, talker_vocab_size, (n,), generator=generator)
    return g, c0
