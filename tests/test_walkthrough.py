"""Notebook 00's toy round: the printed walk is the decoder's computation, and the acceptance identities hold."""

import pytest
import torch

from helpers.method.decoding import Decoder
from helpers.method import reference_round as w
from helpers.report.nb00_overview import toy_decoder, toy_frame


@pytest.fixture(scope="module")
def toy():
    return toy_decoder(seed=0)


@pytest.mark.parametrize("seed", range(6))
def test_walkthrough_tokens_equal_the_ar_codes(toy, seed):
    g, c0, u = toy_frame(seed)
    walk = w.reference_frame(toy, g, c0, u)
    ar = Decoder(toy.predictor, toy.sampler).decode_frame(g, c0, u).codes[0].tolist()
    assert walk["codes"] == ar == walk["ar_codes"]
    emitted = [walk["c1"]["draw"]] + [c for r in walk["rounds"] for c in r["emitted"].values()]
    assert emitted == ar
    assert sum(r["accepted"] + 1 for r in walk["rounds"]) + 1 == toy.predictor.num_codes
    for r in walk["rounds"]:                              # each committed code is its own position's draw
        for nd in r["nodes"]:
            lo, hi = nd["interval"]
            assert lo <= nd["u"] * nd["cdf"][-1] < hi or nd["draw"] == len(nd["p"]) - 1
        path = [step["at"] for step in r["walk"]]
        depths = [r["nodes"][i]["fed"] for i in path]
        assert len(set(depths)) == len(depths)             # one node per depth on the accepted path


def test_toy_sizes(toy):
    assert toy.predictor.vocab_size == 4 and toy.drafter.depth == 2 and toy.tree.size == 3


def test_acceptance_probability_is_the_childrens_target_mass(toy):
    g, c0, u = toy_frame(0)
    walk = w.reference_frame(toy, g, c0, u)
    checked = w.node_targets(walk)
    assert checked                                        # the toy tree's root and node (0,) have children
    for _, p, children in checked:
        r = w.acceptance_check(p, children, draws=20000, seed=1)
        assert r["exact"] == pytest.approx(float(p[children].sum()), abs=1e-15)
        assert r["closed form equal"] and r["specinfer"] == pytest.approx(r["exact"], abs=1e-12)
        assert abs(r["empirical"] - r["exact"]) <= 4 * r["se"]
        kept = torch.ones(4, dtype=torch.bool)
        kept[children] = False
        residual = torch.where(kept, p, torch.zeros_like(p))
        assert r["residual"] == pytest.approx((residual / residual.sum()).tolist(), abs=1e-12)
        assert r["ok"]


def test_specinfer_with_point_mass_drafts_accepts_each_candidate_with_its_target_mass():
    p = [0.1, 0.4, 0.3, 0.2]
    r = w.specinfer_deterministic(p, [1, 3])
    assert r["accept"] == pytest.approx([0.4, 0.2])
    assert r["residual"] == pytest.approx([0.25, 0.0, 0.75, 0.0])


def test_acceptance_check_fails_on_a_wrong_distribution():
    p = torch.tensor([0.1, 0.4, 0.3, 0.2], dtype=torch.float64)
    r = w.acceptance_check(p, [1], draws=20000)
    assert r["ok"]
    r["exact"] = 0.5                                      # the empirical frequency is far from a wrong claim
    assert abs(r["empirical"] - r["exact"]) > 4 * r["se"]


@pytest.mark.parametrize("seed", range(4))
def test_walkthrough_of_prenorm_offsets_equals_the_decoder(toy, seed):
    """The reference rounds (pre-norm states of `CodePredictor` calls) give the fused decoder's drafts and codes
    (toy_walkthrough raises otherwise) for offsets added before the final norm."""
    from helpers.method.decoding import Decoder
    from helpers.method.drafters import PreNormOffsets
    p = toy.predictor
    offsets = torch.randn(2, p.hidden_size, generator=torch.Generator().manual_seed(seed), dtype=p.dtype)
    decoder = Decoder(p, toy.sampler, PreNormOffsets(p, 2, offsets=offsets), toy.tree)
    g, c0, u = toy_frame(seed)
    walk = w.reference_frame(decoder, g, c0, u)
    assert walk["codes"] == Decoder(p, toy.sampler).decode_frame(g, c0, u).codes[0].tolist()
    assert any(r["drafts"] for r in walk["rounds"])
