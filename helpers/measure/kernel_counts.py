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
from helpers.method.decoding import Decoder
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
    of each decoder over the frames g [F, Ht], c0 [F], u [F, 15], as dispatch counts them: each frame's inputs are
    checked first (`Decoder.check`, whose reads of c0 are input validation), then the frame alone is counted
    (`Decoder.run`). first: rounds of the first graph per N (default 6; then 1)."""
    predictor = predictor.with_kernel("dense") if predictor.kernel != "dense" else predictor
    first, n = first or {}, predictor.num_codes
    out = {"frames": g.shape[0], "rounds": {}, "reads": {}}
    ar = Decoder(predictor, sampler, views=False)                                   # as on a GPU
    k, v, us, codes = ar.buffers(1)
    us.copy_(u[0])
    t = torch.ones(1, dtype=torch.long, device=predictor.device)                    # root position 1
    out["prefill"] = _count(lambda: ar.modules.prefill(g[:1], c0[:1], k, v, us, codes)).kernels
    token = torch.zeros(1, 1, dtype=torch.long, device=predictor.device)
    out["ar_step"] = _count(lambda: ar.modules.step(token, k, v, t, us, codes)).kernels
    decoders = {"ar_eager": ar, "ar_frame": Decoder(predictor, sampler, rounds_per_graph=(n - 1, 1))}
    for size, tree in trees.items():
        frame = Decoder(predictor, sampler, drafter, tree, rounds_per_graph=(first.get(size, 6), 1))
        query = torch.zeros(1, tree.size + 1, dtype=torch.long, device=predictor.device)
        out["rounds"][size] = _count(lambda: frame.modules.step(query, k, v, t, us, codes)).kernels
        decoders[f"spec{size}"] = Decoder(predictor, sampler, drafter, tree, views=False)
        decoders[f"spec{size}_frame"] = frame
    for name, dec in decoders.items():
        reads = []
        for i in range(g.shape[0]):
            dec.check(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
            reads.append(_count(lambda: dec.run(g[i:i + 1], c0[i:i + 1], u[i:i + 1])).host_reads)
        out["reads"][name] = sum(reads) / len(reads)
    return out


def format_kernel_counts(counts: dict) -> str:
    lines = [f"kernels (dispatched ops) per call: AR step {counts['ar_step']}, prefill {counts['prefill']}; "
             "per full-tree round: " + ", ".join(f"N = {n} {k}" for n, k in counts["rounds"].items()),
             f"host reads per frame (mean of {counts['frames']}): "
             + ", ".join(f"{name} {r:.1f}" for name, r in counts["reads"].items())]
    return "\n".join(lines)
