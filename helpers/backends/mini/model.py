"""The miniature Qwen3-TTS: the official `Qwen3TTSForConditionalGeneration` at tiny size.

Same classes, same prompt layout and same `generate` as the real checkpoint; only the sizes, the text
vocabulary (our own symbols) and the codec (ours, 16 codebooks at 12.5 Hz) differ.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration

from helpers.adapter.global_rng import global_rng
from helpers.backends.languages import LANGUAGES
from helpers.method.checks import positive_int

TEXT_SPECIALS = ("<|im_start|>", "<|im_end|>", "assistant", "\n", "<tts_pad>", "<tts_bos>", "<tts_eos>")
CODEC_SPECIALS = ("pad", "bos", "eos", "think", "nothink", "think_bos", "think_eos")


@dataclass(frozen=True)
class MiniModelSpec:
    """Sizes of the miniature. The real 0.6B: talker 1024 x 28 layers, code predictor 1024 x 5, vocab 2048."""

    codec_size: int = 256
    talker_hidden: int = 192
    talker_layers: int = 4
    predictor_hidden: int = 192
    predictor_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    text_hidden: int = 64

    def __post_init__(self):
        for name, value in asdict(self).items():
            positive_int(f"MiniModelSpec.{name}", value)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}")


class TextVocab:
    """Symbol <-> id for the miniature's text stream; the chat specials come first."""

    def __init__(self, symbols: list[str]):
        self.symbols = list(TEXT_SPECIALS) + sorted(set(symbols) - set(TEXT_SPECIALS))
        self.index = {s: i for i, s in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def chat_ids(self, symbols: list[str]) -> torch.Tensor:
        """`<|im_start|>assistant\\n` + symbols + `<|im_end|>\\n<|im_start|>assistant\\n` -> [1, n + 8]."""
        if not symbols:
            raise ValueError("empty text: nothing to say")
        unknown = sorted({s for s in symbols if s not in self.index})
        if unknown:
            raise ValueError(f"symbols outside the miniature's text vocabulary: {unknown[:10]}")
        s, e, a, nl = (self.index[x] for x in TEXT_SPECIALS[:4])
        return torch.tensor([[s, a, nl] + [self.index[x] for x in symbols] + [e, nl, s, a, nl]])


def build_mini_model(spec: MiniModelSpec, vocab: TextVocab, speakers: list[str], seed: int = 0,
                     max_frames: int = 512) -> Qwen3TTSForConditionalGeneration:
    """A randomly initialised miniature (train it with helpers.backends.mini.train). Codec ids 0..codec_size-1; the
    control ids sit above them inside the top 1024 ids that the official `generate` suppresses."""
    v = spec.codec_size
    ids = {name: v + i for i, name in enumerate(CODEC_SPECIALS)}
    languages = {name: v + len(CODEC_SPECIALS) + i for i, name in enumerate(LANGUAGES.values())}
    spk = {name.lower(): v + 32 + i for i, name in enumerate(speakers)}
    head_dim = spec.talker_hidden // spec.num_heads
    predictor = dict(vocab_size=v, hidden_size=spec.predictor_hidden, intermediate_size=3 * spec.predictor_hidden,
                     num_hidden_layers=spec.predictor_layers, num_attention_heads=spec.num_heads,
                     num_key_value_heads=spec.num_kv_heads, head_dim=spec.predictor_hidden // spec.num_heads,
                     num_code_groups=16, max_position_embeddings=64)
    talker = dict(code_predictor_config=predictor, vocab_size=v + 1024, hidden_size=spec.talker_hidden,
                  intermediate_size=3 * spec.talker_hidden, num_hidden_layers=spec.talker_layers,
                  num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads, head_dim=head_dim,
                  text_hidden_size=spec.text_hidden, text_vocab_size=len(vocab), num_code_groups=16,
                  max_position_embeddings=max_frames + 256,
                  rope_scaling={"rope_type": "default", "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8],
                                "interleaved": True},
                  codec_eos_token_id=ids["eos"], codec_think_id=ids["think"], codec_nothink_id=ids["nothink"],
                  codec_think_bos_id=ids["think_bos"], codec_think_eos_id=ids["think_eos"],
                  codec_pad_id=ids["pad"], codec_bos_id=ids["bos"], spk_id=spk,
                  spk_is_dialect={name: False for name in spk}, codec_language_id=languages)
    config = Qwen3TTSConfig(talker_config=talker, speaker_encoder_config={}, tokenizer_type="mini_rvq_12hz",
                            tts_model_size="mini", tts_model_type="custom_voice",
                            im_start_token_id=vocab.index["<|im_start|>"], im_end_token_id=vocab.index["<|im_end|>"],
                            tts_pad_token_id=vocab.index["<tts_pad>"], tts_bos_token_id=vocab.index["<tts_bos>"],
                            tts_eos_token_id=vocab.index["<tts_eos>"])
    with global_rng(seed):                      # the official init draws from the global RNG
        return Qwen3TTSForConditionalGeneration(config).eval()
