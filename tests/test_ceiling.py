"""The ideal drafter's ceiling equals the brute-force marginal; target sharpness is well formed."""

import torch

from conftest import frame_inputs
from helpers.method.ceiling import _marginals, ceiling_mean, ceiling_sums, target_sharpness
from helpers.method.sampler import SamplerConfig, target_probs

SAMPLER = SamplerConfig(top_k=50, temperature=0.9)


def test_depth1_marginal_equals_brute_force(tiny):
    spec, talker, predictor = tiny
    g, c0 = frame_inputs(spec, 1, seed=4)
    codes = torch.cat((c0, torch.randint(0, spec.vocab_size, (15,), generator=torch.Generator().manual_seed(0))))
    t, v = 5, spec.vocab_size
    marginals, covered = _marginals(predictor, g, codes, t, depth=1, width=v, sampler=SAMPLER)
    marginal = marginals[0]
    h = predictor.teacher_forced_hidden(g, codes[None])
    p_t = target_probs(predictor.logits(h[:, t - 1:t], [t])[0, 0], SAMPLER).double()
    variants = codes.repeat(v, 1)
    variants[:, t] = torch.arange(v)
    hv = predictor.teacher_forced_hidden(g.expand(v, -1), variants)
    p_next = target_probs(predictor.logits(hv[:, t:t + 1], [t + 1])[:, 0], SAMPLER).double()     # [V, V]
    brute = (p_t[:, None] * p_next).sum(0)
    assert abs(covered[0] - 1.0) < 1e-9 and abs(float(marginal.sum()) - 1.0) < 1e-9
    assert torch.allclose(marginal, brute, atol=1e-9)


def test_ceiling_and_sharpness_shapes(tiny):
    spec, talker, predictor = tiny
    g, c0 = frame_inputs(spec, 2, seed=5)
    codes = torch.cat((c0[:, None], torch.randint(0, spec.vocab_size, (2, 15),
                                                  generator=torch.Generator().manual_seed(1))), dim=1)
    ceiling, covered = ceiling_mean(*ceiling_sums(predictor, g, codes, SAMPLER, depth=3, width=3, m=4, beam=5))
    assert ceiling.shape == (3, 4) and covered.shape == (3,) and bool((covered <= 1 + 1e-9).all())
    assert bool((ceiling.cumsum(-1) <= 1 + 1e-9).all()) and bool((ceiling[:, 1:] <= ceiling[:, :-1] + 1e-12).all())
    entropy, top = target_sharpness(predictor, predictor.teacher_forced_hidden(g, codes), SAMPLER)
    assert entropy.shape == top.shape == (15,)
    assert bool((entropy >= 0).all()) and bool(((top > 0) & (top <= 1)).all())
    cold = target_sharpness(predictor, predictor.teacher_forced_hidden(g, codes), SamplerConfig(temperature=0.01))
    assert bool((cold[1] > top).all()) and bool((cold[0] < entropy).all())


def test_the_ideal_drafter_in_its_own_dtype_agrees_with_float64(tiny):
    """The stages enumerate the ideal drafter in IDEAL_DTYPE (float32: 2.3x faster on the miniature's CPU); it
    must give the float64 ceiling and drafts, not merely ones of the right shape."""
    from helpers.experiment.stages.ideal import IDEAL_DTYPE
    from helpers.method.ceiling import ideal_drafts
    from helpers.method.predictor import CodePredictor
    spec, talker, predictor = tiny
    low = CodePredictor.from_talker(talker, dtype=IDEAL_DTYPE)
    assert low.dtype == IDEAL_DTYPE != predictor.dtype
    g, c0 = frame_inputs(spec, 2, seed=6)
    codes = torch.cat((c0[:, None], torch.randint(0, spec.vocab_size, (2, 15),
                                                  generator=torch.Generator().manual_seed(2))), dim=1)
    exact, covered = ceiling_mean(*ceiling_sums(predictor, g, codes, SAMPLER, depth=3, width=4, m=4, beam=16))
    fast, fast_covered = ceiling_mean(*ceiling_sums(low, g, codes, SAMPLER, depth=3, width=4, m=4, beam=16))
    assert torch.allclose(fast, exact, atol=1e-5) and torch.allclose(fast_covered, covered, atol=1e-5)
    drafts, _ = ideal_drafts(predictor, g, codes, SAMPLER, depth=3, width=4, beam=16)
    fast_drafts, _ = ideal_drafts(low, g, codes, SAMPLER, depth=3, width=4, beam=16)
    assert (fast_drafts == drafts).float().mean() > 0.95      # argmax ties may round either way
