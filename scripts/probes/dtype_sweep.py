"""Fused draft+verify call at the 0.6B code-predictor shape, q = 1 (AR) and q = N + 1, reused-head drafts, root t=1,
one thread, all configs interleaved (shuffled round-robin) in one process.
Modes: fp32 / bf16 eager (project's FusedStep as is); bf16pk: same call, projections + heads via oneDNN prepacked
weights (torch.ops.mkldnn._reorder_linear_weight / _linear_pointwise); w8a8: fp32 call, projections + heads via
fbgemm dynamic-quant int8 linears (quantize_dynamic); w8a16: bf16 call, projections + heads via
aten._weight_int8pack_mm."""
import sys, time, json, argparse
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests")]
import numpy as np, torch
import torch.nn.functional as F
torch.set_num_threads(1)
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker
from helpers.method.predictor import CodePredictor
from helpers.method.fused import FusedCore, FusedStep
from helpers.method.fused.core import rms_norm_one_kernel
from helpers.method.calibration import REFERENCE_TABLE, greedy_tree
from helpers.method.drafters import make_drafter

REAL = TinyTalkerSpec(hidden_size=1024, num_layers=5, num_heads=16, num_kv_heads=8, head_dim=128, vocab_size=2048,
                      talker_hidden_size=1024, talker_vocab_size=3072, num_code_groups=16, intermediate_size=3072)
SIZES = [4, 8, 15, 16, 31, 32, 47, 63]
T = 1

# ---------------------------------------------------------------- linear backends: weight [N, K] -> f(x [..., K])
def lin_onednn(w, m):
    p = torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), m)
    return lambda x: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")

def lin_w8a8(w, m):
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(w.float())
    return torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)[0]

def lin_w8a16(w, m):
    w = w.float()
    s = w.abs().amax(1) / 127
    wi = torch.round(w / s[:, None]).clamp(-128, 127).to(torch.int8).contiguous()
    s = s.bfloat16()
    def f(x):
        return torch.ops.aten._weight_int8pack_mm(x.reshape(-1, x.shape[-1]), wi, s).view(*x.shape[:-1], -1)
    return f

BACKENDS = {"bf16pk": lin_onednn, "w8a8": lin_w8a8, "w8a16": lin_w8a16}

class Patched:
    """FusedStep.call_at with every projection and head matmul replaced by a linear backend."""
    def __init__(self, step, make):
        self.step, c = step, step.core
        m = step.q
        # layer_weights are [K, N] (x @ W); the backends take [N, K]
        self.lins = [tuple(make(w.t(), m) for w in (lw[1], lw[3], lw[5], lw[6])) for lw in c.layer_weights]
        self.heads = [make(h.t(), m) for h in c.heads[:c.num_codes]]        # c.heads [.., H, V] -> [V, H]

    def layers(self, x, cos, sin, mask, k_cache, v_cache):
        c = self.step.core
        batch, q = x.shape[0], x.shape[1]
        nh, nkv, hd = c.nh, c.nkv, c.hd
        groups = nh // nkv
        h = x if c.project is None else c.project(x)
        k_out, v_out = [], []
        for li, ((w_in, _, w_qk, _, w_post, _, _, act), (f_qkv, f_o, f_gu, f_d)) in enumerate(zip(c.layer_weights, self.lins)):
            qkv = f_qkv(rms_norm_one_kernel(h, w_in, c.eps)).view(batch, q, nh + 2 * nkv, hd)
            qk = F.rms_norm(qkv[:, :, :nh + nkv], (hd,), None, c.eps) * w_qk
            qk = qk * cos + torch.roll(qk, hd // 2, -1) * sin
            qs = qk[:, :, :nh].reshape(batch, q, nkv, groups, hd).permute(0, 2, 3, 1, 4).reshape(batch, nkv, groups * q, hd)
            ks = qk[:, :, nh:].transpose(1, 2)
            vs = qkv[:, :, nh + nkv:].transpose(1, 2)
            k_out.append(ks); v_out.append(vs)
            keys = torch.cat((k_cache[li], ks), dim=2)
            values = torch.cat((v_cache[li], vs), dim=2)
            scores = torch.matmul(qs, keys.transpose(-1, -2)).view(batch, nkv, groups, q, -1) + mask
            probs = torch.softmax(scores, dim=-1, dtype=c.softmax_dtype)
            if c.softmax_dtype is not None:
                probs = probs.to(values.dtype)
            o = torch.matmul(probs.view(batch, nkv, groups * q, -1), values)
            h = h + f_o(o.view(batch, nkv, groups, q, hd).permute(0, 3, 1, 2, 4).reshape(batch, q, nh * hd))
            gate, up = f_gu(rms_norm_one_kernel(h, w_post, c.eps)).chunk(2, dim=-1)
            h = h + f_d(act(gate) * up)
        return c.final_norm(h), torch.stack(k_out), torch.stack(v_out)

    def __call__(self, tokens, k_cache, v_cache, t):
        st, c = self.step, self.step.core
        t = int(t)
        emb_offset, cos, sin, mask, _ = st.rows[t]
        x = F.embedding(tokens + emb_offset, c.tables)
        hidden, k_new, v_new = self.layers(x, cos, sin, mask, k_cache, v_cache)
        n = c.num_codes
        if st.depth == 0:
            return self.heads[min(t, n - 1)](hidden), k_new, v_new
        D = st.depth
        x = hidden[0]
        both = [torch.stack([self.heads[min(t + d + j, n - 1)](x[s:e]) for j in range(D + 1)]) for d, s, e in st.groups]
        both = torch.cat(both, dim=1)
        return both[:1], k_new, v_new, both[1:].topk(st.width, dim=-1).indices.transpose(0, 1)[None]

def build(modes):
    torch.manual_seed(0)
    talker = build_tiny_talker(REAL, seed=0, dtype=torch.float32)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in SIZES}
    calls, check = {}, {}
    base_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16pk": torch.bfloat16,
                  "w8a8": torch.float32, "w8a16": torch.bfloat16}
    preds = {}
    for mode in modes:
        dt = base_dtype[mode]
        if dt not in preds:
            p = CodePredictor.from_talker(talker, dtype=dt)
            preds[dt] = (p, make_drafter("reused", p, 3), FusedCore(p, max_depth=3))
        p, dr, core = preds[dt]
        for n in [0] + SIZES:
            step = FusedStep(core, None) if n == 0 else FusedStep(core, trees[n], dr)
            inputs = step.example_inputs(T)
            fn = step if mode in ("fp32", "bf16") else Patched(step, BACKENDS[mode])
            calls[(mode, n)] = (fn, inputs)
    return calls, preds

def interleaved_p50(calls: dict, warm: int, reps: int) -> dict:
    """{key: fn()} -> {key: p50 ms}: every call once per round, in a shuffled order (seed 0), warm rounds untimed."""
    times = {k: [] for k in calls}
    keys = list(calls)
    rng = np.random.default_rng(0)
    for r in range(warm + reps):
        for i in rng.permutation(len(keys)):
            s = time.perf_counter(); calls[keys[i]](); e = time.perf_counter()
            if r >= warm:
                times[keys[i]].append(e - s)
    return {k: float(np.median(v) * 1e3) for k, v in times.items()}

@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="fp32,bf16,bf16pk,w8a8,w8a16")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--out", default="outputs/probes/dtype_sweep.json")
    a = ap.parse_args()
    modes = a.modes.split(",")
    t0 = time.perf_counter()
    calls, preds = build(modes)
    print(f"build {time.perf_counter() - t0:.1f} s", flush=True)
    # agreement of the patched calls with the project's call in the same dtype (logits, N=15)
    for mode in modes:
        ref_mode = "bf16" if mode in ("bf16pk", "w8a16") else "fp32"
        if mode in ("fp32", "bf16") or (ref_mode, 15) not in calls:
            continue
        for n in (0, 15):
            f, inp = calls[(mode, n)]; r, rinp = calls[(ref_mode, n)]
            a_, b_ = f(*inp), r(*rinp)
            err = (a_[0].float() - b_[0].float()).abs().max().item(); scale = b_[0].float().abs().max().item()
            agree = "" if n == 0 else f", draft top-{r.width} equal {(a_[3] == b_[3]).float().mean().item():.3f}"
            print(f"{mode} vs {ref_mode} N={n}: max|dlogit| {err:.4f} (max|logit| {scale:.3f}){agree}", flush=True)
    p50 = interleaved_p50({k: (lambda fn=fn, inp=inp: fn(*inp)) for k, (fn, inp) in calls.items()}, a.warm, a.reps)
    res = {m: {n: p50[(m, n)] for n in [0] + SIZES} for m in modes}
    json.dump(res, open(a.out, "w"), indent=1)
    best_ar = min(res[m][0] for m in modes)
    print("| mode | q=1 ms | " + " | ".join(f"N={n}" for n in SIZES) + " | proj. speedup N=32 (own AR) | vs best AR |")
    print("|---|---|" + "---|" * len(SIZES) + "---|---|")
    for m in modes:
        r = res[m]
        cells = " | ".join(f"{r[n]:.2f} ({r[n] / r[0] - 1:+.2f})" for n in SIZES)
        print(f"| {m} | {r[0]:.2f} | {cells} | {2.47 / (r[32] / r[0]):.2f} | {2.47 * best_ar / r[32]:.2f} |")

if __name__ == "__main__":
    main()
