"""The GPU's cost in advance, counted on any machine: kernels per call and host reads per frame.

At batch 1 on a GPU a captured graph costs about its kernel count times a few microseconds, and every host read
of a device value costs a sync (tens of microseconds). Both are counted here by dispatch (`DeviceOps`), on the
device path a CUDA tensor takes, on whatever machine runs it; inductor fuses elementwise kernels, so these are the
counts of the eager and cuda_graph modes, an upper bound for inductor_graph.

`kernel_counts` -> {"ar_step", "prefill", "rounds": {N: kernels of one full-tree round}, "reads":
{decoder: host reads per frame, mean}, "frames"}.
"""

from __future__ import annotations

import torch

from helpers.method.capture import DeviceOps
from helpers.method.decoding import ARDecoder, CompiledAR, FrameSpeculative, SpeculativeDecoder
from helpers.method.drafters import Drafter
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree


def _count(fn) -> DeviceOps:
    with torch.no_grad(), DeviceOps() as ops:
        fn()
    return ops


@torch.no_grad()
def kernel_counts(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                  c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                  first: dict[int, int] | None = None) -> dict:
    """Kernels of one AR step, one prefill and one full-tree round per N (at root t = 1), and host reads per frame
    of each decoder over the frames g [F, Ht], c0 [F], u [F, 15]. first: rounds of `FrameSpeculative`'s first graph
    per N (default 6)."""
    predictor = predictor.with_kernel("dense") if predictor.kernel != "dense" else predictor
    first = first or {}
    frames = range(g.shape[0])
    out = {"frames": g.shape[0], "rounds": {}, "reads": {}}
    ar = CompiledAR(predictor, sampler, "none", frame=False)
    s = ar.state
    s.start(predictor, g[:1], c0[:1], u[:1])
    out["prefill"] = _count(lambda: ar.prefill(g[:1], c0[:1], s.k, s.v, s.u, s.codes)).kernels
    token = torch.zeros(1, 1, dtype=torch.long, device=predictor.device)
    out["ar_step"] = _count(lambda: ar.step(token, s.k, s.v, s.ts[1], s.u, s.codes)).kernels
    decoders = {"ar_eager": ARDecoder(predictor, views=False), "ar_frame": CompiledAR(predictor, sampler, "none")}
    for n, tree in trees.items():
        frame = FrameSpeculative(predictor, drafter, tree, sampler, "none", first=first.get(n, 6))
        rnd = frame.round
        query = torch.zeros(1, tree.size + 1, dtype=torch.long, device=predictor.device)
        out["rounds"][n] = _count(lambda: rnd(query, s.k, s.v, s.ts[1], s.u, s.codes)).kernels
        decoders[f"spec{n}"] = SpeculativeDecoder(predictor, drafter, tree, sampler, views=False)   # as on a GPU
        decoders[f"spec{n}_frame"] = frame
    for name, dec in decoders.items():
        if isinstance(dec, ARDecoder):
            run = (lambda i, dec=dec: dec.decode_frame(g[i:i + 1], c0[i:i + 1], sampler, u[i:i + 1]))
        else:
            run = (lambda i, dec=dec: dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]))
        reads = []
        for i in frames:
            with DeviceOps() as ops:
                result = run(i)
            reads.append(result.reads if result.reads is not None else ops.host_reads)   # the decoder's own count
        out["reads"][name] = sum(reads) / len(reads)
    return out


def format_kernel_counts(counts: dict) -> str:
    lines = [f"kernels (dispatched ops) per call: AR step {counts['ar_step']}, prefill {counts['prefill']}; "
             "per full-tree round: " + ", ".join(f"N = {n} {k}" for n, k in counts["rounds"].items()),
             f"host reads per frame (mean of {counts['frames']}): "
             + ", ".join(f"{name} {r:.1f}" for name, r in counts["reads"].items())]
    return "\n".join(lines)
