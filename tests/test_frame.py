"""The speculative frame in few graphs (`helpers.method.decoding.Decoder` with `rounds_per_graph`): the AR codes
for the same uniforms (float64), the same calls as the eager speculative decoder, and one host read for a frame that fits the
first graph.

Its rounds run the full tree at every root (masked past c15) where the eager decoder prunes it: both walk the
same accepted paths, so the calls agree frame by frame. Eager modules ("none") on both tiny shapes and every
drafter; through torch.compile (aot_eager: dynamo and functionalisation, the graph inductor gets) on one shape.
"""

import pytest
import torch

from drafting import TREES, random_drafters
from helpers.method.decoding import Decoder, first_rounds
from test_compiled import SAMPLER, decode_all, frames


@pytest.mark.parametrize("drafter_name", ["offsets", "offsets_prenorm", "medusa", "reused"])
@pytest.mark.parametrize("tree_name,first,then", [("sparse4", 6, 1), ("full2", 3, 2), ("chain", 14, 1),
                                                  ("sparse16", 1, 14), ("sparse1", 5, 3)])
def test_frame_equals_ar_and_eager_rounds(tiny, drafter_name, tree_name, first, then):
    spec, _, cp = tiny
    drafter = random_drafters(cp, seed=1)[drafter_name]
    g, c0, u = frames(spec, 30, seed=5)
    ar = Decoder(cp, SAMPLER).decode_frame(g, c0, u).codes
    eager = decode_all(Decoder(cp, SAMPLER, drafter, TREES[tree_name]), g, c0, u)
    ours = decode_all(Decoder(cp, SAMPLER, drafter, TREES[tree_name], "none", rounds_per_graph=(first, then)), g, c0, u)
    for i, (e, r) in enumerate(zip(eager, ours)):
        assert torch.equal(r.codes[0], ar[i]), f"frame {i}: {r.codes[0].tolist()} != {ar[i].tolist()}"
        assert r.calls == e.calls, f"frame {i}: {r.calls} calls, the eager decoder {e.calls}"
        rounds = r.calls - 1
        assert r.reads == 1 + max(0, -(-(rounds - first) // then)), f"frame {i}: {r.reads} reads for {rounds} rounds"
        assert 1 <= e.reads <= rounds             # the eager decoder: a read after every tree round
    assert sum(r.calls for r in ours) < 15 * len(ours), "no draft ever accepted"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_frame_compiled_equals_eager(dtype):
    from conftest import SPECS
    from helpers.adapter.tiny import build_tiny_talker
    from helpers.method.predictor import CodePredictor

    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=dtype))
    drafter = random_drafters(cp, seed=2)["offsets"]
    g, c0, u = frames(spec, 8, seed=7, dtype=dtype)
    ar = Decoder(cp, SAMPLER).decode_frame(g, c0, u).codes
    dec = Decoder(cp, SAMPLER, drafter, TREES["sparse4"], "inductor", rounds_per_graph=(4, 2),
                  torch_backend="aot_eager")
    out = decode_all(dec, g, c0, u)
    assert all(torch.equal(r.codes[0], ar[i]) for i, r in enumerate(out))
    assert dec.compiler.seconds > 0 and sum(r.calls for r in out) < 15 * len(out)


def test_frame_arguments_are_checked(tiny):
    _, _, cp = tiny
    drafter = random_drafters(cp, seed=1)["offsets"]
    with pytest.raises(ValueError, match=r"first=0 rounds per graph; allowed: an integer in 1\.\.14"):
        Decoder(cp, SAMPLER, drafter, TREES["sparse4"], "none", rounds_per_graph=(0, 1))
    with pytest.raises(ValueError, match="needs a CUDA model"):
        Decoder(cp, SAMPLER, drafter, TREES["sparse4"], "inductor_graph", rounds_per_graph=(6, 1))
    assert [first_rounds(x) for x in (1.0, 2.03, 2.47, 15.0)] == [14, 7, 6, 1]
    with pytest.raises(ValueError, match="at least 1"):
        first_rounds(0.5)
