"""The miniature at the real code predictor's size (`helpers.adapter.full_size`): in float64 its logits at tree
queries, its drafts and its codes equal the miniature's; a shape it cannot embed into is refused by name."""

from dataclasses import replace

import pytest
import torch

from helpers.adapter.full_size import full_size, head_dim_map
from helpers.adapter.tiny import QWEN3_TTS_0_6B
from helpers.experiment.bench.inner_loop_pack import load_pack
from helpers.method.decoding import Decoder
from helpers.method.drafters import MedusaHeads, top_candidates
from helpers.method.predictor import CodePredictor

# A middle shape (every rule in play: wider heads, more query heads per group, more layers) cheap enough to decode
from helpers.method.sampler import frame_uniforms
# every shipped frame in float64; the real shape is checked at tree queries and on a few frames.
MIDDLE = replace(QWEN3_TTS_0_6B, hidden_size=256, num_layers=4, num_heads=12, num_kv_heads=3, head_dim=64,
                 talker_hidden_size=256, intermediate_size=512)


@pytest.fixture(scope="module")
def pack():
    return load_pack("outputs/gpu-pack", dtype=torch.float64)


@pytest.fixture(scope="module", params=["real", "middle"])
def embedded(request, pack):
    fs = full_size(pack.talker, QWEN3_TTS_0_6B if request.param == "real" else MIDDLE)
    return request.param, fs, CodePredictor.from_talker(fs.talker)


@torch.no_grad()
def _tree_logits(predictor, g, codes, tree, t):
    """Logits [B, q, V] of a tree query rooted at c_t (tokens: the frame's codes at each node's position) over the
    committed [g, c0..c_{t-1}]."""
    cache = predictor.new_cache(g.shape[0])
    predictor.prefill(cache, g, codes[:, 0])
    if t > 1:
        x = predictor.embed(codes[:, 1:t], range(1, t))
        _, k, v = predictor.forward_query(cache, x, torch.ones(t - 1, t - 1, dtype=torch.bool).tril())
        cache.commit(k, v)
    pos = [min(t + d, 15) for d in tree.depth_list]
    tokens = codes[:, pos]
    hidden, _, _ = predictor.forward_query(cache, predictor.embed(tokens, pos), tree.mask, tree.depth)
    return torch.cat([predictor.logits(hidden[:, i:i + 1], [min(p + 1, 15)]) for i, p in enumerate(pos)], dim=1)


def test_the_real_shape_is_the_0_6b_code_predictors(embedded, pack):
    name, fs, big = embedded
    if name != "real":
        return
    assert (big.hidden_size, len(big.layers), big.num_heads, big.num_kv_heads, big.head_dim) == (1024, 5, 16, 8, 128)
    assert big.config.intermediate_size == 3072 and big.vocab_size == pack.predictor.vocab_size
    assert fs.scale == pytest.approx((1024 / 128) ** 0.5)


def test_logits_at_tree_queries_equal_the_miniatures(embedded, pack):
    _, fs, big = embedded
    g = pack.g[:8]
    codes = torch.randint(0, pack.predictor.vocab_size, (8, 16), generator=torch.Generator().manual_seed(0))
    codes[:, 0] = pack.c0[:8]
    tree = pack.trees[pack.main][16]
    for t in (1, 6, 13):
        small = _tree_logits(pack.predictor, g, codes, tree, t)
        assert torch.allclose(_tree_logits(big, fs.lift(g), codes, tree, t), small, rtol=0, atol=1e-9 * float(small.abs().max()))


@torch.no_grad()
def test_every_drafter_drafts_what_the_miniatures_drafts(embedded, pack):
    _, fs, big = embedded
    codes = torch.cat((pack.c0[:8, None], torch.randint(0, 256, (8, 15), generator=torch.Generator().manual_seed(1))), 1)
    medusa = MedusaHeads(pack.predictor, 3)               # not shipped in the pack: its heads perturbed here
    with torch.no_grad():
        medusa.heads.add_(0.1 * torch.randn(medusa.heads.shape, generator=torch.Generator().manual_seed(2),
                                            dtype=medusa.heads.dtype))
    for kind, small in {**pack.drafters, "medusa": medusa}.items():
        drafter = fs.drafter(small, big)
        r_small = pack.predictor.teacher_forced_hidden(pack.g[:8], codes, prenorm=small.prenorm)
        r_big = big.teacher_forced_hidden(fs.lift(pack.g[:8]), codes, prenorm=small.prenorm)
        assert r_big.shape[-1] == big.hidden_size
        for t in (1, 7, 12):
            a, b = small.draft_logits(r_small[:, t - 1], t), drafter.draft_logits(r_big[:, t - 1], t)
            assert torch.allclose(b, a, rtol=0, atol=1e-9 * float(a.abs().max())), kind
            assert torch.equal(top_candidates(drafter, r_big[:, t - 1], t, 3, 4),
                               top_candidates(small, r_small[:, t - 1], t, 3, 4)), kind


def test_the_codes_equal_the_miniatures_on_every_frame(embedded, pack):
    name, fs, big = embedded
    frames = pack.g.shape[0] if name == "middle" else 4
    tree = pack.trees[pack.main][8]
    drafter = fs.drafter(pack.drafters[pack.main], big)
    decoders = [(Decoder(p, pack.sampler), Decoder(p, pack.sampler, d, tree))
                for p, d in ((pack.predictor, pack.drafters[pack.main]), (big, drafter))]
    u = frame_uniforms(torch.Generator().manual_seed(2), 15, batch=frames)
    for j in range(frames):
        g = pack.g[j:j + 1]
        (ar_s, spec_s), (ar_b, spec_b) = [
            (ar.decode_frame(x, pack.c0[j:j + 1], u[j:j + 1]), spec.decode_frame(x, pack.c0[j:j + 1], u[j:j + 1]))
            for (ar, spec), x in zip(decoders, (g, fs.lift(g)))]
        assert torch.equal(ar_b.codes, ar_s.codes) and torch.equal(spec_b.codes, spec_s.codes), j
        assert torch.equal(spec_b.codes, ar_b.codes) and spec_b.calls == spec_s.calls, j


def test_head_dims_keep_their_rotary_frequency():
    dims = head_dim_map(32, 128)
    assert dims.tolist()[:3] == [0, 4, 8] and dims[16] == 64 and dims[31] == 124
    small = 10000.0 ** (-torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    big = 10000.0 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    assert torch.allclose(big[dims[:16]], small)


@pytest.mark.parametrize("change, message", [
    (dict(head_dim=48), "head dim 48 is not a multiple of the miniature's 32"),
    (dict(num_heads=12, num_kv_heads=8), "12 query heads do not divide into 8 key-value groups"),
    (dict(num_heads=8, num_kv_heads=8), "groups of 1 query heads per key-value head, fewer than the miniature's 2"),
    (dict(hidden_size=64, talker_hidden_size=64), "hidden size 64 < the miniature's 128"),
    (dict(num_layers=2), "layers 2 < the miniature's 3"),
    (dict(talker_hidden_size=2048), "talker width 2048 differs from hidden size 1024"),
])
def test_a_shape_that_does_not_embed_is_refused_by_name(pack, change, message):
    with pytest.raises(ValueError, match=message):
        full_size(pack.talker, replace(QWEN3_TTS_0_6B, **change))


def test_lift_refuses_another_width(embedded, pack):
    _, fs, _ = embedded
    with pytest.raises(ValueError, match="g has width 64; the miniature's talker width is 128"):
        fs.lift(torch.zeros(1, 64, dtype=torch.float64))
