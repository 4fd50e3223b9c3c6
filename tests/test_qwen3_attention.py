"""The talker's attention implementations on the tiny saved checkpoint: `sdpa` (the paper's parameter files) and
`eager` (every other test), in float64 and in bf16, alone and in right-padded batches, on the default shape and on
one whose heads x head_dim is twice the hidden size (as the real 0.6B's 16 x 128 against 1024).

What holds (docs/real-model.md, "Attention and float64"):
- float64, `sdpa`: the official talker's attention stays float64, so teacher forcing reproduces free-running
  synthesis's g bit for bit, alone or in a right-padded batch.
- float64, `eager`: qwen_tts 0.1.1's `eager_attention_forward` takes the softmax in float32
  (`softmax(..., dtype=torch.float32).to(query.dtype)`). That is the whole difference between the two: with that one
  softmax taken in float64 (`float64_softmax`), eager equals sdpa bit for bit. As it ships, eager's g differs from
  sdpa's (and its teacher-forced g from its free-running g) by float32 roundings of g; the codes agree.
  (RMSNorm and the rotary tables are float32 in both implementations, so the talker's float64 states are
  float32-rounded values either way.)
- bf16: teacher-forced and free-running g differ by bf16 rounding, measured below (not zero, bounded).
"""

from contextlib import contextmanager, nullcontext
from functools import cache

import pytest
import torch
from torch import nn

from drafting import TREES, random_drafters
from helpers.adapter.synthesis import synthesize
from helpers.adapter.talker_inputs import Utterance, batch_inputs, talker_states
from helpers.method.decoding import Decoder
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig
from qwen3_tiny import WIDE_HEAD_DIM, build_tiny_tts

TEXTS = ("the cat sat on the mat", "a red sun", "one two big house tree")      # three lengths: a padded batch
FRAMES = (11, 16, 21)                                                           # frame budgets (EOS may come first)
SAMPLER = SamplerConfig(50, 1.0, 0.9)
F32 = torch.finfo(torch.float32).eps
BF16 = torch.finfo(torch.bfloat16).eps


def float32_bound(g: torch.Tensor, ulps: int = 4) -> float:
    """A few float32 roundings of g: how far eager's float32 softmax may move the float64 talker's states."""
    return ulps * F32 * g.abs().max().item()


@contextmanager
def float64_softmax():
    """qwen_tts's eager attention with its softmax in the query's dtype (float64 stays float64), nothing else
    changed: the stock function is looked up at each call, so it is swapped only inside the block."""
    from qwen_tts.core.models import modeling_qwen3_tts as official

    stock = official.eager_attention_forward

    def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **_):
        k = official.repeat_kv(key, module.num_key_value_groups)
        v = official.repeat_kv(value, module.num_key_value_groups)
        weights = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            weights = weights + attention_mask[:, :, :, :k.shape[-2]]
        weights = nn.functional.softmax(weights, dim=-1, dtype=torch.promote_types(query.dtype, torch.float32))
        weights = weights.to(query.dtype)
        return torch.matmul(weights, v).transpose(1, 2).contiguous(), weights

    official.eager_attention_forward = eager
    try:
        yield
    finally:
        official.eager_attention_forward = stock


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """The default tiny checkpoint and its wide-head twin (heads x head_dim = 2 x hidden): the TTS folders only (no
    Whisper, no datasets), about a second each, so this file stays in the fast tier (~15 s on one thread)."""
    root = tmp_path_factory.mktemp("attention")
    return {"default": build_tiny_tts(root / "default"), "wide": build_tiny_tts(root / "wide", head_dim=WIDE_HEAD_DIM)}


@pytest.fixture(scope="module")
def runs(checkpoints):
    """run(checkpoint, attn, dtype) -> (tts, utterances, syntheses, sampling): each text synthesised once (AR inner
    loop, seed = its index), its codes kept as the utterance's teacher-forcing codes; attn "eager64": eager under
    `float64_softmax`."""
    from qwen_tts import Qwen3TTSModel

    @cache
    def run(checkpoint: str, attn: str, dtype: torch.dtype):
        tts = Qwen3TTSModel.from_pretrained(str(checkpoints[checkpoint]), device_map="cpu", dtype=dtype,
                                            attn_implementation="eager" if attn == "eager64" else attn)
        sampling = tts._merge_generate_kwargs(top_k=SAMPLER.top_k, top_p=SAMPLER.top_p, temperature=SAMPLER.temperature,
                                              subtalker_top_k=SAMPLER.top_k, subtalker_top_p=SAMPLER.top_p,
                                              subtalker_temperature=SAMPLER.temperature)
        sampling.pop("max_new_tokens")
        utterances, syntheses = [], []
        with float64_softmax() if attn == "eager64" else nullcontext():
            for seed, (text, frames) in enumerate(zip(TEXTS, FRAMES)):
                ids = tts._tokenize_texts([tts._build_assistant_text(text)])[0]
                s = synthesize(tts.model, ids, "english", "ryan", "ar", seed=seed, max_frames=frames,
                               non_streaming_mode=True, **sampling)
                syntheses.append(s)
                utterances.append(Utterance(ids, "english", "ryan", s.codes))
        return tts, utterances, syntheses, sampling

    return run


def teacher_forced(tts, utterances, attn, batch_size):
    with float64_softmax() if attn == "eager64" else nullcontext():
        return talker_states(tts.model, utterances, batch_size=batch_size, non_streaming=True)


def max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    assert [x.shape for x in a] == [y.shape for y in b]
    return max((x.double() - y.double()).abs().max().item() for x, y in zip(a, b))


def test_the_wide_checkpoint_has_heads_wider_than_hidden(runs):
    tts = runs("wide", "sdpa", torch.float64)[0]
    for cfg in (tts.model.config.talker_config, tts.model.config.talker_config.code_predictor_config):
        assert cfg.num_attention_heads * cfg.head_dim == 2 * cfg.hidden_size
    attention = tts.model.talker.model.layers[0].self_attn
    assert attention.q_proj.weight.shape == (4 * WIDE_HEAD_DIM, 32) and attention.o_proj.weight.shape == (32, 64)
    default = runs("default", "sdpa", torch.float64)[0].model.config.talker_config
    assert default.num_attention_heads * default.head_dim == default.hidden_size
    assert runs("wide", "sdpa", torch.float64)[0].model.talker.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("checkpoint", ["default", "wide"])
def test_sdpa_and_eager_agree_in_float64(runs, checkpoint):
    """Same codes and g for sdpa and eager; eager with a float64 softmax equals sdpa bit for bit (so the float32
    softmax is the only difference: a mask, padding or position that differed would break this), and the stock eager
    differs from sdpa by float32 roundings of g, not more."""
    sdpa, eager, eager64 = (runs(checkpoint, attn, torch.float64) for attn in ("sdpa", "eager", "eager64"))
    assert sdpa[0].model.talker.config._attn_implementation == "sdpa"
    assert eager[0].model.talker.config._attn_implementation == "eager"
    frames = [s.codes.shape[0] for s in sdpa[2]]
    assert min(frames) >= 5 and len(set(frames)) == len(frames)
    for other in (eager, eager64):
        assert all(torch.equal(a.codes, b.codes) for a, b in zip(sdpa[2], other[2]))
    g = [s.g for s in sdpa[2]]
    assert all(x.dtype == torch.float64 for x in g)
    assert max_diff(g, [s.g for s in eager64[2]]) == 0.0
    stock = max_diff(g, [s.g for s in eager[2]])
    assert 0.0 < stock <= float32_bound(torch.cat(g)), stock        # eager's float32 softmax shows, by roundings only


@pytest.mark.parametrize("checkpoint", ["default", "wide"])
@pytest.mark.parametrize("attn", ["sdpa", "eager", "eager64"])
def test_padded_teacher_forcing_equals_each_utterance_alone_in_float64(runs, checkpoint, attn):
    """A right-padded batch of three lengths gives each utterance the g (and the talker's c0 logits) it gets alone,
    and free-running synthesis's g: bit for bit with a float64 attention, to float32 roundings with the stock eager."""
    tts, utterances, syntheses, _ = runs(checkpoint, attn, torch.float64)
    inputs, mask, starts, _ = batch_inputs(tts.model, utterances, non_streaming=True)
    assert len({int(row.sum()) for row in mask}) == 3 and not bool(mask.all())     # padded to the longest
    alone = [teacher_forced(tts, [u], attn, 1)[0] for u in utterances]
    batched = teacher_forced(tts, utterances, attn, len(utterances))
    free = [s.g for s in syntheses]
    tolerance = float32_bound(torch.cat(free)) if attn == "eager" else 0.0
    assert max_diff(batched, alone) <= tolerance
    assert max_diff(alone, free) <= tolerance
    head = tts.model.talker.codec_head
    with torch.no_grad():
        for a, b, s in zip(alone, batched, syntheses):
            assert torch.equal(head(a).argmax(-1), head(b).argmax(-1))
            assert torch.equal(head(b).argmax(-1), head(s.g).argmax(-1))


def test_the_inner_loop_is_exact_on_wide_heads(runs):
    """Speculative == AR codes over whole utterances on the wide-head checkpoint (sdpa, float64), and drafts were
    accepted: the inner loop's stack reads heads x head_dim, not the hidden size."""
    tts, utterances, ar_runs, sampling = runs("wide", "sdpa", torch.float64)
    predictor = CodePredictor.from_talker(tts.model.talker)
    assert (predictor.num_heads, predictor.head_dim, predictor.hidden_size) == (4, WIDE_HEAD_DIM, 32)
    decoder = Decoder(predictor, SAMPLER, random_drafters(predictor)["offsets"], TREES["sparse16"])
    frames = calls = 0
    for seed, (u, ar) in enumerate(zip(utterances, ar_runs)):
        spec = synthesize(tts.model, u.input_ids, "english", "ryan", decoder, seed=seed, max_frames=FRAMES[seed],
                          non_streaming_mode=True, **sampling)
        assert torch.equal(spec.codes, ar.codes) and torch.equal(spec.g, ar.g)
        assert ar.calls == [15] * len(ar.calls)
        frames, calls = frames + len(spec.calls), calls + sum(spec.calls)
    assert calls < 15 * frames


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_bf16_teacher_forcing_differs_from_synthesis_by_rounding_only(runs, attn):
    """Measured: in bf16 teacher-forced g (batched, right-padded) and free-running g differ (a frame's 16 embeddings
    summed in another order, a batched attention instead of one-step KV-cache decoding), by a few bf16 roundings;
    in float64 they do not differ (sdpa) or differ by float32 roundings (eager's float32 softmax)."""
    tts, utterances, syntheses, _ = runs("default", attn, torch.bfloat16)
    batched = teacher_forced(tts, utterances, attn, len(utterances))
    free = [s.g for s in syntheses]
    assert all(g.dtype == torch.bfloat16 for g in batched + free)
    scale = max(g.double().abs().max().item() for g in free)
    worst = max_diff(batched, free)
    relative = max(((b.double() - f.double()).norm() / f.double().norm()).item() for b, f in zip(batched, free))
    assert 0.0 < worst <= 8 * BF16 * scale, (worst, scale)             # nonzero, at most a few bf16 roundings
    assert 0.0 < relative <= 2 * BF16, relative
    tts64, utterances64, syntheses64, _ = runs("default", attn, torch.float64)
    free64 = [s.g for s in syntheses64]
    exact = max_diff(teacher_forced(tts64, utterances64, attn, len(utterances64)), free64)
    assert exact <= (float32_bound(torch.cat(free64)) if attn == "eager" else 0.0)
    assert exact < worst / 1000
