"""Linear stack of the 0.6B code predictor (5 layers: qkv 1024->4096, o 2048->1024, gate_up 1024->6144,
down 3072->1024), one thread, per backend, at M rows; interleaved round-robin (`dtype_sweep.interleaved_p50`).
Prints p50 ms and the ratio to M = 1 per backend; the prepacked / int8 backends are `dtype_sweep.BACKENDS`.

    mkdir -p outputs/probes && .venv/bin/python scripts/probes/linear_stack.py
"""
import json
import sys

import torch
import torch.nn.functional as F

from dtype_sweep import BACKENDS, interleaved_p50

torch.set_num_threads(1)
torch.manual_seed(0)
SH = [(1024, 4096), (2048, 1024), (1024, 6144), (3072, 1024)]      # (in K, out N) per projection
L = 5
MS = [1, 5, 16, 17, 32, 33, 48, 64]
W = [torch.randn(n, k) * 0.02 for _ in range(L) for k, n in SH]     # [N, K] fp32, CPU (this probe times the CPU)
INPUT_DTYPE = {"bf16pk": torch.bfloat16, "w8a16": torch.bfloat16, "w8a8": torch.float32}   # what each backend takes


def stack(pairs):
    """One pass over the stack: pairs [(fn, x)] called in order."""
    def go():
        for f, x in pairs:
            f(x)
    return go


def build(M: int) -> dict:
    """Backend name -> one pass over the stack at M rows."""
    xs = {dt: {k: torch.randn(M, k).to(dt) for k in (1024, 2048, 3072)} for dt in (torch.float32, torch.bfloat16)}
    def x_at(w):                                   # the project's layout: x @ W^T, W^T contiguous [K, N]
        return lambda x: torch.matmul(x, w)
    cfg = {"fp32 x@Wt": stack([(x_at(w.t().contiguous()), xs[torch.float32][w.shape[1]]) for w in W]),
           "bf16 x@Wt": stack([(x_at(w.t().contiguous().bfloat16()), xs[torch.bfloat16][w.shape[1]]) for w in W]),
           "bf16 F.linear": stack([(lambda x, w=w.bfloat16(): F.linear(x, w), xs[torch.bfloat16][w.shape[1]])
                                   for w in W])}
    try:
        packed = [(torch.ops.mkl._mkl_reorder_linear_weight(w.contiguous(), M), w) for w in W]
        cfg["fp32 mkl prepacked"] = stack([(lambda x, p=p, w=w: torch.ops.mkl._mkl_linear(x, p, w, None, M),
                                            xs[torch.float32][w.shape[1]]) for p, w in packed])
    except Exception as e:
        print("prepack fp32 failed:", repr(e)[:300], file=sys.stderr)
    for name, make in BACKENDS.items():
        dt = INPUT_DTYPE[name]
        try:
            cfg[name] = stack([(make(w.to(dt) if name == "bf16pk" else w, M), xs[dt][w.shape[1]]) for w in W])
        except Exception as e:
            print(f"{name} failed:", repr(e)[:300], file=sys.stderr)
    return cfg


@torch.no_grad()
def main(reps=40, warm=5):
    p50 = interleaved_p50({(name, M): fn for M in MS for name, fn in build(M).items()}, warm, reps)
    names = list(dict.fromkeys(name for name, _ in p50))
    res = {n: {M: p50[(n, M)] for M in MS} for n in names}
    print("| backend | " + " | ".join(f"M={M} ms (x M=1)" for M in MS) + " |")
    print("|---|" + "---|" * len(MS))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{res[n][M]:.2f} ({res[n][M] / res[n][1]:.2f})" for M in MS) + " |")
    with open("outputs/probes/linear_stack.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
