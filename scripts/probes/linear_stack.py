"""Linear stack of the 0.6B code predictor (5 layers: qkv 1024->4096, o 2048->1024, gate_up 1024->6144,
down 3072->1024), one thread, per backend, M rows; interleaved round-robin. Prints p50 ms and ratio to M=1."""
import time, sys, json
import numpy as np, torch
import torch.nn.functional as F
torch.set_num_threads(1)
torch.manual_seed(0)
SH = [(1024, 4096), (2048, 1024), (1024, 6144), (3072, 1024)]
L = 5
MS = [1, 5, 16, 17, 32, 33, 48, 64]
W = [[torch.randn(n, k) * 0.02 for k, n in SH] for _ in range(L)]         # [N, K] fp32

def fns():
    out = {}
    wt32 = [[w.t().contiguous() for w in l] for l in W]
    wt16 = [[w.t().contiguous().bfloat16() for w in l] for l in W]
    w16 = [[w.bfloat16().contiguous() for w in l] for l in W]
    def stack(x, ws, f):
        for l in ws:
            for w in l:
                y = f(x[..., :w.shape[-2] if f is mm else None], w)
        return y
    def run(xs, ws, f):
        def go():
            for l in ws:
                for w in l:
                    f(xs[w.shape[-2] if f is mm else w.shape[-1]], w)
        return go
    return wt32, wt16, w16

def mm(x, w): return torch.matmul(x, w)

def build(M):
    cfg = {}
    xs32 = {k: torch.randn(M, k) for k in (1024, 2048, 3072)}
    xs16 = {k: v.bfloat16() for k, v in xs32.items()}
    wt32 = [[w.t().contiguous() for w in l] for l in W]
    wt16 = [[w.t().contiguous().bfloat16() for w in l] for l in W]
    w16 = [[w.bfloat16().contiguous() for w in l] for l in W]
    def loop(pairs):
        def go():
            for f, x, w in pairs:
                f(x, w)
        return go
    cfg["fp32 x@Wt"] = loop([(torch.matmul, xs32[w.shape[0]], w) for l in wt32 for w in l])
    cfg["bf16 x@Wt"] = loop([(torch.matmul, xs16[w.shape[0]], w) for l in wt16 for w in l])
    cfg["bf16 F.linear"] = loop([(F.linear, xs16[w.shape[1]], w) for l in w16 for w in l])
    try:
        pk = [[torch.ops.mkldnn._reorder_linear_weight(w, M) for w in l] for l in w16]
        lp = lambda x, p: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
        pairs = [(lp, xs16[w.shape[1]], p) for l, lw in zip(pk, w16) for p, w in zip(l, lw)]
        cfg["bf16 onednn prepacked"] = loop(pairs)
    except Exception as e:
        print("prepack bf16 failed:", repr(e)[:300], file=sys.stderr)
    try:
        pk32 = [[torch.ops.mkl._mkl_reorder_linear_weight(w.contiguous(), M) for w in l] for l in W]
        ml = lambda x, pw: torch.ops.mkl._mkl_linear(x, pw[0], pw[1], None, M)
        pairs = [(ml, xs32[w.shape[1]], (p, w)) for l, lw in zip(pk32, W) for p, w in zip(l, lw)]
        cfg["fp32 mkl prepacked"] = loop(pairs)
    except Exception as e:
        print("prepack fp32 failed:", repr(e)[:300], file=sys.stderr)
    try:
        q = []
        for l in W:
            for w in l:
                s = w.abs().amax(1) / 127
                wi = torch.round(w / s[:, None]).clamp(-128, 127).to(torch.int8).contiguous()
                q.append((wi, s.bfloat16()))
        f = lambda x, ws: torch.ops.aten._weight_int8pack_mm(x, ws[0], ws[1])
        cfg["W8A16 _weight_int8pack_mm"] = loop([(f, xs16[wi.shape[1]], (wi, s)) for wi, s in q])
    except Exception as e:
        print("int8pack failed:", repr(e)[:300], file=sys.stderr)
    try:
        dq = []
        for l in W:
            for w in l:
                lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
                lin.weight.data.copy_(w)
                dq.append(torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8))
        cfg["W8A8 dynamic (fbgemm, fp32 io)"] = loop([(lambda x, m: m(x), xs32[m[0].in_features], m) for m in dq])
    except Exception as e:
        print("dynamic quant failed:", repr(e)[:300], file=sys.stderr)
    return cfg

@torch.no_grad()
def main(reps=40, warm=5):
    cfgs = {(name, M): fn for M in MS for name, fn in build(M).items()}
    keys = list(cfgs)
    times = {k: [] for k in keys}
    rng = np.random.default_rng(0)
    for r in range(warm + reps):
        for i in rng.permutation(len(keys)):
            k = keys[i]
            s = time.perf_counter(); cfgs[k](); e = time.perf_counter()
            if r >= warm:
                times[k].append(e - s)
    names = sorted({k[0] for k in keys}, key=lambda n: [k[0] for k in keys].index(n))
    res = {n: {M: float(np.median(times[(n, M)]) * 1e3) for M in MS} for n in names}
    print("| backend | " + " | ".join(f"M={M} ms (x M=1)" for M in MS) + " |")
    print("|---|" + "---|" * len(MS))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{res[n][M]:.2f} ({res[n][M]/res[n][1]:.2f})" for M in MS) + " |")
    json.dump(res, open("outputs/probes/linear_stack.json", "w"), indent=1)

main()
