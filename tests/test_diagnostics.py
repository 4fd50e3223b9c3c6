"""Per-position diagnostics: identities, shapes, translation constancy, codebook usage, uncapped calibration, and
the controlled drift (tiny position_ramp) that offsets partly close."""

import pytest
import torch

from conftest import frame_inputs
from drafting import per_head_loss
from helpers.method.calibration import acceptance_table, greedy_tree, path_probability, tree_margin, uncapped_table
from helpers.method.diagnostics import (Diagnostics, codebook_usage, diagnostics, own_drafts, own_head_loss,
                                        score_drafts, translation_constancy)
from helpers.method.drafters import Drafter, MedusaHeads, PositionOffsets, ReusedHeads
from helpers.method.sampler import SamplerConfig, target_probs
from helpers.experiment.stages.drift import drift_recovery

SAMPLER = SamplerConfig(top_k=50, temperature=0.9)


class OwnHeadDrafter(Drafter):
    """A drafter that reads h_{t+j} (not h_t) of the frames it was given: the own head, as a Drafter."""

    def __init__(self, predictor, h, depth=3):
        super().__init__(predictor, depth)
        self.h = h

    def draft_logits(self, h, t, depth=None):
        assert torch.equal(h, self.h[:, t - 1])                         # the diagnostics pass every frame in order
        return torch.stack([self.h[:, t + j - 1] @ self.head_weight(t, j).T for j in range(1, (depth or 3) + 1)], 1)

    def loss(self, h, codes):
        return per_head_loss(self, h, codes)


@pytest.fixture(scope="module")
def frames(tiny):
    spec, _, predictor = tiny
    g, c0 = frame_inputs(spec, 12, seed=3)
    rest = torch.randint(0, spec.vocab_size, (12, 15), generator=torch.Generator().manual_seed(2))
    codes = torch.cat((c0[:, None], rest), dim=1)
    return predictor, g, codes, predictor.teacher_forced_hidden(g, codes)


def test_shapes_identities_and_round_trip(frames):
    predictor, g, codes, h = frames
    drafters = {"reused": ReusedHeads(predictor), "offsets": PositionOffsets(predictor, offsets=torch.randn(3, h.shape[-1])),
                "medusa": MedusaHeads(predictor), "own_as_drafter": OwnHeadDrafter(predictor, h)}
    d = diagnostics(predictor, drafters, g, codes, SAMPLER, 3, ideal_frames=torch.tensor([0, 5]),
                    ideal=dict(width=4, beam=8))
    assert set(d.scores) == {"own", "reused", "offsets", "medusa", "own_as_drafter", "own_ideal_frames", "ideal"}
    for s in d.scores.values():
        assert s.acceptance.shape == s.top1.shape == (14, 3)
        valid = ~s.acceptance.isnan()
        assert valid.sum() == 14 * 3 - 3 and not bool(valid[13, 1:].any()) and not bool(valid[12, 2])
        assert torch.equal(valid, ~s.top1.isnan()) and bool((s.acceptance[valid] <= 1).all())
    # the own head's acceptance is the target's top probability of c_{t+j} (argmax is kept by the sampler)
    _, top = d.target.by_start(3)
    assert torch.allclose(d.scores["own"].acceptance, top, equal_nan=True, atol=1e-12)
    # a drafter that is the own head: zero mismatch, in acceptance and top-1
    for key in ("acceptance", "top1"):
        assert torch.allclose(getattr(d.scores["own_as_drafter"], key), getattr(d.scores["own"], key), equal_nan=True)
    assert d.gap_closed("own_as_drafter") == pytest.approx([1.0] * 3)
    # medusa initialised from the reused heads drafts what they draft; top-1 averaged over t = acceptance_table
    assert torch.allclose(d.scores["medusa"].top1, d.scores["reused"].top1, equal_nan=True)
    a = acceptance_table(ReusedHeads(predictor), h, codes, width=1)[:, 0]
    assert d.scores["reused"].by_depth()[1] == pytest.approx(a.tolist(), abs=1e-12)
    # the target's entropy is the sampler's
    p = target_probs(predictor.logits(h[:, 4:5], [5])[:, 0], SAMPLER).double().detach()
    assert float(d.target.entropy[4]) == pytest.approx(float(-(p * p.clamp_min(1e-300).log()).sum(-1).mean()))
    back = Diagnostics.from_dict(d.to_dict())
    assert torch.allclose(back.scores["ideal"].acceptance, d.scores["ideal"].acceptance.cpu(), equal_nan=True)
    assert back.to_dict() == d.to_dict()


def test_own_head_loss_is_the_drafter_loss_of_the_own_head(frames):
    predictor, _, codes, h = frames
    assert float(own_head_loss(predictor, h, codes, 3)) == pytest.approx(float(OwnHeadDrafter(predictor, h).loss(h, codes)))


def test_prenorm_states_norm_to_the_hidden_states(frames):
    predictor, g, codes, h = frames
    stream = predictor.teacher_forced_hidden(g, codes, prenorm=True)
    assert not torch.allclose(stream, h) and torch.allclose(predictor.final_norm(stream), h, atol=1e-12)


def test_translation_constancy_of_a_pure_translation_and_of_noise():
    gen = torch.Generator().manual_seed(0)
    base, shift = torch.randn(200, 1, 32, generator=gen, dtype=torch.float64), torch.randn(32, generator=gen)
    pure = base + torch.arange(15, dtype=torch.float64)[None, :, None] * shift          # h_{t+j} - h_t = j * shift
    c = translation_constancy(pure, 3)
    assert c.cosine.shape == (14, 3) and bool(c.cosine[13, 1:].isnan().all())
    valid = ~c.cosine.isnan()
    assert torch.allclose(c.cosine[valid], torch.ones(()).double())
    assert torch.allclose(c.shared_share, torch.ones(3).double()) and torch.allclose(c.systematic_share, torch.ones(3).double())
    assert torch.allclose(c.mean_norm, torch.arange(1, 4).double() * shift.norm())
    noise = translation_constancy(torch.randn(200, 15, 32, generator=gen, dtype=torch.float64), 3)
    assert bool((noise.shared_share < 0.05).all()) and bool((noise.cosine[valid].abs().mean() < 0.9))


def test_codebook_usage_of_uniform_and_skewed_columns():
    uniform = torch.arange(64).repeat(4)
    skewed = torch.cat((torch.zeros(192, dtype=torch.long), torch.arange(64)))
    u = codebook_usage(torch.stack((uniform, skewed), 1), [64, 64])
    assert u.entropy_bits[0] == pytest.approx(6.0) and u.max_bits.tolist() == [6.0, 6.0]
    p0 = 193 / 256
    expected = -(p0 * torch.tensor(p0).log2() + 63 * (1 / 256) * torch.tensor(1 / 256).log2())
    assert u.entropy_bits[1] == pytest.approx(float(expected)) and u.top_share.tolist() == [1 / 64, p0]
    assert u.used.tolist() == [64, 64] and u.frames == 256
    with pytest.raises(ValueError, match=r"codebook 1: codes must lie in 0..63"):
        codebook_usage(torch.stack((uniform, skewed + 1), 1), [64, 64])
    with pytest.raises(ValueError, match=r"one size per codebook"):
        codebook_usage(uniform[:, None], [64, 64])


def test_bad_input_is_refused(frames):
    predictor, g, codes, h = frames
    with pytest.raises(ValueError, match=r"expected h \[B, 15, H\] and codes \[B, 16\]"):
        score_drafts(predictor, h[:, :5], codes, SAMPLER, {"own": own_drafts(predictor, h, 3)})
    with pytest.raises(ValueError, match="drafts 2 codes, the diagnostics ask for depth 3"):
        diagnostics(predictor, {"reused": ReusedHeads(predictor, 2)}, g, codes, SAMPLER, 3)


def test_uncapped_table_never_caps_the_greedy_tree(frames):
    predictor, _, codes, h = frames
    drafter = ReusedHeads(predictor)
    narrow = acceptance_table(drafter, h, codes, width=8)
    flat = torch.full_like(narrow, 0.1)                   # a flat table: the N = 32 tree takes every depth-1 rank
    assert max(p[0] for p in greedy_tree(flat, 32).paths) == 7
    for size in (4, 32, 64):
        a = uncapped_table(drafter, h, codes, size)
        assert a.shape[1] >= min(size + 1, predictor.vocab_size)
        assert torch.equal(a[:, :8], narrow)               # the same counts, more ranks
        ranks = max(max(p) for p in greedy_tree(a, size).paths)
        assert ranks < a.shape[1] - 1 or a.shape[1] == predictor.vocab_size


def test_offsets_before_the_norm_recover_a_known_drift():
    """On the tiny position_ramp model the drift is a translation before the final norm, not after it: the offsets
    added before the norm close most of the own-head vs reused-head gap, those after it (a logit bias) only part."""
    r = drift_recovery(train_frames=1000, held_frames=200)
    assert r.loss["own"] < r.loss["offsets_prenorm"] < r.loss["offsets"] < r.loss["reused"]
    assert r.loss_gap_closed("offsets_prenorm") > 0.8, r.loss
    assert 0.1 < r.loss_gap_closed("offsets") < 0.8, r.loss
    t = r.diagnostics.translation
    assert bool((t["prenorm"].shared_share > 0.9).all()) and bool((t["normed"].shared_share < 0.2).all())
    assert r.to_dict()["loss_gap_closed"] == {k: r.loss_gap_closed(k) for k in ("offsets", "offsets_prenorm")}


def test_tree_margin_explains_the_greedy_tree():
    a = torch.tensor([[0.5, 0.3, 0.08], [0.2, 0.1, 0.05]], dtype=torch.float64)
    tree = greedy_tree(a, 3)                                  # (0,) 0.5, (1,) 0.3, (0, 0) 0.1 beats (2,) 0.08
    assert tree.paths == [(0,), (1,), (0, 0)]
    m = tree_margin(tree, a)
    assert m["per_depth"] == [2, 1] and m["weakest"] == ((0, 0), pytest.approx(0.1))
    assert m["best_left_out"] == ((2,), pytest.approx(0.08)) and m["best_deeper"] is None     # depth K already
    flat = torch.tensor([[0.3, 0.3, 0.3], [0.1, 0.1, 0.1]], dtype=torch.float64)
    m = tree_margin(greedy_tree(flat, 3), flat)               # every depth-1 rank first: the tree stays at depth 1
    assert m["per_depth"] == [3] and m["best_deeper"] == ((0, 0), pytest.approx(0.03))
    assert path_probability((0, 5), a) == 0.0                 # beyond the table: never accepted
