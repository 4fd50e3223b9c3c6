"""What a call cannot cost less than on this device: the decoder stack's matrix products alone, and the host's share.

- `matmul_floor`: p50 of every projection of the stack and one head at q query rows, in the predictor's dtype and
  layout (the `FusedCore`'s own laid-out weights, each read in turn as a call reads them), per q. Its growth with q is
  what a verify call over N + 1 tokens must pay whatever else is made free: the arithmetic, about
  2 x (projection + head parameters) floating-point operations a row.
- `read_floor`: p50 of reading an array of a call's weight bytes once (a float32 tensor's sum) at torch's thread
  count: the least a call that reads its weights once can cost on this machine (a large last-level cache can hold
  an array of tens of MB, and then the floor is the cache's bandwidth, not memory's).
- `host_floor`: p50 of one compiled call that does one tiny operation (dynamo's guards and the compiled region's
  wrapper), against the same operation eager: what each host call of a compiled loop costs on top of its graph.
"""

from __future__ import annotations

import torch

from helpers.measure.timing import time_calls
from helpers.method.stack import FusedCore, apply
from helpers.method.kernels import in_features
from helpers.method.predictor import CodePredictor


def row_flops(core: FusedCore) -> int:
    """Floating-point operations of one query row through every projection and one head (2 per multiply-add)."""
    macs = sum(in_features(w) * out for w, out in _linears(core))
    return 2 * macs


def _linears(core: FusedCore) -> list[tuple[object, int]]:
    """(laid-out weight, output width) of every projection of the stack (q/k/v, o, gate/up, down), then one head."""
    weights = [w for layer in core.layer_weights for w in layer.projections]
    weights.append(core.head_linears[0])

    def width(w) -> int:
        return apply(torch.zeros(1, in_features(w), dtype=core.heads.dtype, device=core.heads.device), w).shape[-1]
    return [(w, width(w)) for w in weights]


@torch.no_grad()
def matmul_floor(predictor: CodePredictor, sizes=(1, 2, 3, 5, 9, 17, 33), warmup: int = 50,
                 iters: int = 500) -> dict:
    """-> {"row_mflop", "ms": {q: p50 of the stack's products at q rows}, "over_q1": {q: ms[q] / ms[1]},
    "gflops": {q: rows x row_flops / p50}} on the predictor's device, in its dtype and kernel."""
    core = FusedCore(predictor, max_depth=0)
    linears = _linears(core)
    gen = torch.Generator(device=predictor.device).manual_seed(0)
    ms = {}
    for q in sizes:
        inputs = [torch.randn(q, in_features(w), generator=gen, device=predictor.device).to(predictor.dtype)
                  for w, _ in linears]

        def run():
            for (w, _), x in zip(linears, inputs):
                apply(x, w)
        ms[q] = time_calls(run, predictor.device, warmup, iters).p50
    flops = row_flops(core)
    return {"row_mflop": flops / 1e6, "ms": ms, "over_q1": {q: ms[q] / ms[sizes[0]] for q in sizes},
            "gflops": {q: q * flops / (ms[q] * 1e-3) / 1e9 for q in sizes}}


@torch.no_grad()
def read_floor(nbytes: int, warmup: int = 5, iters: int = 40) -> dict:
    """-> {"bytes", "ms" (p50 of one read of `nbytes`), "gb_per_s"}, on the CPU at torch's thread count."""
    data = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device="cpu")
    ms = time_calls(lambda: data.sum(), "cpu", warmup, iters).p50
    return {"bytes": int(nbytes), "ms": ms, "gb_per_s": nbytes / (ms * 1e-3) / 1e9}


@torch.no_grad()
def host_floor(device: torch.device | str = "cpu", backend: str = "inductor", warmup: int = 50,
               iters: int = 2000) -> dict:
    """-> {"eager_ms", "compiled_ms", "host_ms" (compiled - eager)}: one `x + 1` on a [4] tensor, eager and compiled."""
    x = torch.zeros(4, device=device)
    options = {"cpp_wrapper": True} if backend == "inductor" and torch.device(device).type == "cpu" else None
    compiled = torch.compile(lambda a: a + 1, backend=backend, dynamic=False, fullgraph=True, options=options)
    compiled(x)
    eager = time_calls(lambda: x + 1, device, warmup, iters).p50
    done = time_calls(lambda: compiled(x), device, warmup, iters).p50
    return {"eager_ms": eager, "compiled_ms": done, "host_ms": done - eager}


def format_floor(floor: dict, host: dict | None = None) -> str:
    lines = [f"the stack's matrix products alone ({floor['row_mflop']:.2f} MFLOP a row), p50 ms by query rows q:",
             "  q  " + " ".join(f"{q:>7d}" for q in floor["ms"]),
             "  ms " + " ".join(f"{v:7.3f}" for v in floor["ms"].values()),
             "  /q1" + " ".join(f"{v:7.2f}" for v in floor["over_q1"].values()),
             "  GF " + " ".join(f"{v:7.1f}" for v in floor["gflops"].values())]
    if host is not None:
        lines.append(f"one compiled call's host cost: {host['host_ms']:.4f} ms (compiled {host['compiled_ms']:.4f}, "
                     f"eager {host['eager_ms']:.4f})")
    return "\n".join(lines)
