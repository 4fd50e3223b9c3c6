"""Capture-safe by construction: every module the decoders capture runs under `DeviceOps(strict=True)` on the CPU,
which refuses what CUDA-graph capture refuses (host reads, tensors from Python data, cross-device copies).

Covered: `Prefill` (with and without drafts), `ARStep` (tensor t and host int t), `ARFrame`, `Round` for every
pruned tree of each test tree, `RoundLoop` and `SpeculativeFrame`, for every drafter that drafts on the device.
The guard itself is tested on the three faults, the first being the `ARStep` line that broke capture on an H200.
"""

from types import SimpleNamespace

import pytest
import torch

from conftest import frame_inputs
from drafting import TREES, random_drafters
from helpers.method.capture import CaptureError, DeviceOps
from helpers.method.decoding import Decoder
from helpers.method.decoding import ARFrame, RoundLoop, SpeculativeFrame
from helpers.method.round import ARStep, Prefill, Round
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.tree import TreeIndex
from helpers.method.stack import FusedCore

SAMPLER = SamplerConfig(top_k=5, temperature=1.3)
DRAFTERS = ("reused", "offsets", "offsets_prenorm", "medusa")


def check_capturable(module, *args, **kwargs):
    """Run module(*args) under a strict `DeviceOps`: its output, or `CaptureError` naming the first offending op."""
    with torch.no_grad(), DeviceOps(strict=True):
        return module(*args, **kwargs)


def frame_buffers(spec, cp, seed=3):
    g, c0 = frame_inputs(spec, 1, seed=seed)
    k, v, u, codes = Decoder(cp, SAMPLER).buffers(1)                 # a decoder's buffers: k, v, u [15], codes [16]
    u.copy_(frame_uniforms(torch.Generator().manual_seed(seed))[0])
    ts = [torch.full((1,), t, device=cp.device) for t in range(cp.num_codes + 1)]
    return g, c0, SimpleNamespace(k=k, v=v, u=u, codes=codes, ts=ts)


def round_of(core, drafter, tree):
    return Round.build(core, drafter, tree, SAMPLER)


def test_guard_refuses_what_capture_refuses():
    x = torch.arange(4)
    for fault, expected in ((lambda: int(x[0]), "host read"), (lambda: bool(x.sum() > 0), "host read"),
                            (lambda: x.nonzero(), "data-dependent shape"),
                            (lambda: torch.tensor([3], device=x.device), "host data")):
        with pytest.raises(CaptureError, match=expected):
            check_capturable(fault)
    if torch.cuda.is_available():
        with pytest.raises(CaptureError, match="cross-device"):
            check_capturable(lambda: x.to("cuda"))
    with DeviceOps() as ops:                                      # counting, not refusing
        int(x[1] + x[2])
    assert ops.host_reads == 1 and ops.kernels == 1


class HostIntARFrame(ARFrame):
    """The AR frame as it was at 952420a: each step specialised to a host int t, its position then made from it
    (`torch.tensor([t], device=...)` in `ARStep`: the line that broke the first capture on an H200)."""

    def forward(self, g, c0, k, v, u, codes):
        token = self.prefill(g, c0, k, v, u, codes)
        for t in range(1, self.num_codes):
            position = torch.tensor([t], device=token.device)
            token = self.step(token, k, v, position, u, codes)
        return token


def test_guard_fails_on_the_old_ar_step(tiny):
    spec, _, cp = tiny
    g, c0, s = frame_buffers(spec, cp)
    core = FusedCore(cp, max_depth=0)
    modules = Prefill(core, SAMPLER), ARStep.build(core, SAMPLER), cp.num_codes, cp.device
    with pytest.raises(CaptureError, match="host data"):
        check_capturable(HostIntARFrame(*modules), g, c0, s.k, s.v, s.u, s.codes)
    check_capturable(ARFrame(*modules), g, c0, s.k, s.v, s.u, s.codes)


def test_ar_modules_are_capturable(tiny):
    spec, _, cp = tiny
    g, c0, s = frame_buffers(spec, cp)
    core = FusedCore(cp, max_depth=0)
    token = check_capturable(Prefill(core, SAMPLER), g, c0, s.k, s.v, s.u, s.codes)
    step = ARStep.build(core, SAMPLER)
    for t in range(1, cp.num_codes):
        token = check_capturable(step, token, s.k, s.v, s.ts[t], s.u, s.codes)


@pytest.mark.parametrize("drafter_name", DRAFTERS)
@pytest.mark.parametrize("tree_name", ["sparse4", "full2", "chain", "sparse16"])
def test_rounds_are_capturable(tiny, drafter_name, tree_name):
    """Prefill with drafts, then every pruned tree's round at its own roots, and the full tree at every root
    t = 1..15 (the frame loop's masked rounds, the last one past the frame's end)."""
    spec, _, cp = tiny
    drafter = random_drafters(cp, seed=1)[drafter_name]
    tree = TREES[tree_name]
    core = FusedCore(cp, max_depth=tree.max_depth)
    g, c0, s = frame_buffers(spec, cp)
    full = round_of(core, drafter, tree)
    query, _ = check_capturable(Prefill(core, SAMPLER, full.drafts, full.index), g, c0, s.k, s.v, s.u, s.codes)
    n = cp.num_codes
    for t in range(1, n):
        sub = tree.pruned(n - 1 - t)
        module = round_of(core, drafter, sub) if sub is not None else ARStep.build(core, SAMPLER)
        q = query[:, :1 if sub is None else sub.size + 1]
        check_capturable(module, q, s.k, s.v, s.ts[t], s.u, s.codes)
    for t in range(1, n + 1):
        check_capturable(full, query, s.k, s.v, s.ts[t], s.u, s.codes)


@pytest.mark.parametrize("drafter_name", DRAFTERS)
def test_frame_modules_are_capturable(tiny, drafter_name):
    spec, _, cp = tiny
    drafter = random_drafters(cp, seed=1)[drafter_name]
    tree = TREES["sparse16"]
    core = FusedCore(cp, max_depth=tree.max_depth)
    g, c0, s = frame_buffers(spec, cp)
    rnd = round_of(core, drafter, tree)
    query = torch.zeros(1, tree.size + 1, dtype=torch.long)
    t, rounds = torch.ones(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    frame = SpeculativeFrame(Prefill(core, SAMPLER, rnd.drafts, rnd.index), RoundLoop(rnd, 4, cp.num_codes))
    status = check_capturable(frame, g, c0, query, t, rounds, s.k, s.v, s.u, s.codes)
    status = check_capturable(RoundLoop(rnd, 14, cp.num_codes), query, t, rounds, s.k, s.v, s.u, s.codes)
    assert int(status) == int(rounds) * (cp.num_codes + 1) + cp.num_codes and 1 <= int(rounds) <= cp.num_codes - 1
    assert int(t) == cp.num_codes


def test_tree_index_is_built_on_the_device_of_its_model(tiny):
    _, _, cp = tiny
    index = TreeIndex(TREES["sparse4"], cp.device)
    assert all(b.device == cp.device for b in index.buffers())


def test_host_reads_of_a_round_are_refused(tiny):
    """The two places a round could read the host, each refused by the guard: a drafter that drafts at a host int
    (the tests' oracle, which the eager decoders run) and the CPU's eager verify call (`ViewStep`, int(t))."""
    from drafting import OracleDrafter
    from helpers.method.stack import ViewStep

    spec, _, cp = tiny
    tree = TREES["sparse4"]
    core = FusedCore(cp, max_depth=tree.max_depth)
    g, c0, s = frame_buffers(spec, cp)
    oracle = OracleDrafter(cp)
    oracle.codes = torch.zeros(cp.num_codes, dtype=torch.long)
    with pytest.raises(CaptureError, match="host read"):
        check_capturable(Round.build(core, oracle, tree, SAMPLER).drafts, torch.zeros(1, cp.hidden_size,
                         dtype=cp.dtype), s.ts[1])
    step = ViewStep(core, tree)
    with pytest.raises(CaptureError, match="host read"):
        check_capturable(step, *step.example_inputs(1))
