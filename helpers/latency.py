"""Latency of the fused call and of whole frames: what tokens/step buys on this device.

- `call_sweep`: p10/p50/p90 of the fused call at q = 1 (the AR call) and q = N + 1 for each tree,
  after warm-ups, on CPU or CUDA (synchronised; optionally replayed from a captured CUDA graph).
  overhead(N) = p50(q = N + 1) / p50(q = 1) - 1.
- `inner_loop`: whole frames decoded by our AR loop, by the speculative decoder per tree, and by the
  official `code_predictor.generate` as the `qwen_tts` talker calls it, interleaved frame by frame in
  one process on the same frames; medians per frame, measured tokens/step, measured speedup.
- `latency_table`: both joined per N: call_ms_p50, overhead, toks_per_step,
  realised_speedup = toks_per_step / (1 + overhead), measured_speedup, and their ratio.

Everything returns plain dataclasses / dicts (JSON-ready). `python -m helpers.latency` is `make bench`:
the sweep and the inner-loop comparison on the demo's tiny model, printed and saved under outputs/bench/.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from .artifacts import save_json
from .code_predictor import CodePredictor
from .decoding import SpeculativeDecoder, decode_frame_ar
from .drafters import Drafter
from .fused import FusedCore, FusedStep
from .sampling import SamplerConfig
from .tree import SparseTree

SIZES = (4, 8, 16, 32, 64)
# A made-up acceptance table a[d][r] (decreasing with depth and rank) to shape trees when a model's own
# is unknown (random-weight timing models). The same numbers as the tests' table.
REFERENCE_TABLE = torch.tensor([[0.50, 0.20, 0.10, 0.06, 0.04, 0.02],
                                [0.40, 0.15, 0.08, 0.05, 0.03, 0.02],
                                [0.30, 0.12, 0.06, 0.04, 0.02, 0.01]], dtype=torch.float64)


@dataclass
class Percentiles:
    """Milliseconds over `iters` timed calls (after `warmup` untimed ones)."""

    p10: float
    p50: float
    p90: float
    iters: int
    warmup: int

    @classmethod
    def of(cls, seconds: list[float], warmup: int) -> "Percentiles":
        ms = np.asarray(seconds) * 1e3
        p10, p50, p90 = np.percentile(ms, [10, 50, 90])
        return cls(float(p10), float(p50), float(p90), len(ms), warmup)


def _sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def time_calls(fn: Callable[[], object], device: torch.device | str = "cpu", warmup: int = 20,
               iters: int = 200) -> Percentiles:
    """Percentiles of fn()'s wall time, synchronising the device around every call."""
    device = torch.device(device)
    sync = _sync(device)
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - start)
    return Percentiles.of(out, warmup)


def step_inputs(step: FusedStep, t: int = 1, batch: int = 1, seed: int = 0):
    """Example inputs of a fused call: random tokens [B, q], a random full cache, root position t [1]."""
    core = step.core
    p = core.predictor
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, core.vocab, (batch, step.q), generator=gen).to(p.device)
    shape = (core.num_layers, batch, core.nkv, core.slots, core.hd)
    k = torch.randn(shape, generator=gen).to(p.device, p.dtype)
    v = torch.randn(shape, generator=gen).to(p.device, p.dtype)
    return tokens, k, v, torch.tensor([t], device=p.device)


def graphed(step: FusedStep, inputs) -> Callable[[], object]:
    """Capture step(*inputs) in a CUDA graph (fixed shapes, gather path); returns a replay function.
    Inputs are the graph's static buffers: copy new values into them before replaying."""
    step.use_views = False
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            step(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        step(*inputs)
    return graph.replay


@torch.no_grad()
def call_sweep(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], warmup: int = 20,
               iters: int = 200, cuda_graph: bool = False, t: int = 1) -> dict:
    """Per-call latency of the AR call (q = 1) and the fused call of each tree (q = N + 1), root at t.

    -> {"device", "cuda_graph", "ar": Percentiles, "trees": {N: {"q", "call": Percentiles, "overhead"}}}
    """
    device = predictor.device
    if cuda_graph and device.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA model, this one is on {device}")
    core = FusedCore(predictor, max_depth=max(tr.max_depth for tr in trees.values()))

    def timed(step):
        inputs = step_inputs(step, t)
        fn = graphed(step, inputs) if cuda_graph else (lambda: step(*inputs))
        return time_calls(fn, device, warmup, iters)

    ar = timed(core.step(None))
    rows = {}
    for n, tree in trees.items():
        call = timed(core.step(tree, drafter))
        rows[n] = {"q": tree.size + 1, "call": asdict(call), "overhead": call.p50 / ar.p50 - 1.0}
    return {"device": str(device), "cuda_graph": cuda_graph, "ar": asdict(ar), "trees": rows}


@torch.no_grad()
def official_generate(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig):
    """One frame through `code_predictor.generate`, called as the qwen_tts talker calls it."""
    last_id_hidden = predictor.c0_embedding(c0[:, None])
    return predictor.official.generate(
        inputs_embeds=torch.cat((g[:, None].to(last_id_hidden.dtype), last_id_hidden), dim=1),
        max_new_tokens=predictor.num_codes, do_sample=True, top_k=sampler.top_k, top_p=sampler.top_p,
        temperature=sampler.temperature, output_hidden_states=True, return_dict_in_generate=True)


@torch.no_grad()
def inner_loop(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
               c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
               official: bool = True, warmup_frames: int = 2) -> dict:
    """Whole frames, one at a time, interleaved: official generate, our AR loop, our speculative decoder per N.

    g [F, H_talker], c0 [F], u [F, 15]. Checks every speculative frame equals the AR frame.
    -> {"frames", "ar_ms", "official_ms", "ar_over_official", "trees": {N: {"frame_ms", "toks_per_step",
        "measured_speedup", "identical"}}} (medians of per-frame milliseconds)
    """
    device = predictor.device
    sync = _sync(device)
    decoders = {n: SpeculativeDecoder(predictor, drafter, tree, sampler) for n, tree in trees.items()}
    times: dict[str, list[float]] = {"ar": [], "official": [], **{str(n): [] for n in trees}}
    calls = {n: 0 for n in trees}
    same = {n: 0 for n in trees}
    frames = g.shape[0]

    def clock(fn):
        sync()
        start = time.perf_counter()
        out = fn()
        sync()
        return out, time.perf_counter() - start

    for i in range(-warmup_frames, frames):
        j = i % frames
        gi, ci, ui = g[j:j + 1], c0[j:j + 1], u[j:j + 1]
        if official:
            _, dt = clock(lambda: official_generate(predictor, gi, ci, sampler))
            if i >= 0:
                times["official"].append(dt)
        ar, dt = clock(lambda: decode_frame_ar(predictor, gi, ci, sampler, ui))
        if i >= 0:
            times["ar"].append(dt)
        for n, dec in decoders.items():
            res, dt = clock(lambda: dec.decode_frame(gi, ci, ui))
            if i >= 0:
                times[str(n)].append(dt)
                calls[n] += res.calls
                same[n] += bool(torch.equal(res.codes, ar.codes))
    med = {k: float(np.median(v)) * 1e3 if v else None for k, v in times.items()}
    out = {"frames": frames, "ar_ms": med["ar"], "official_ms": med["official"],
           "ar_over_official": med["official"] / med["ar"] if official else None, "trees": {}}
    for n in trees:
        tps = predictor.num_codes * frames / calls[n]
        speedup = med["ar"] / med[str(n)]
        out["trees"][n] = {"frame_ms": med[str(n)], "toks_per_step": tps, "measured_speedup": speedup,
                           "speedup_over_tps": speedup / tps, "identical": same[n] == frames}
    return out


def latency_table(sweep: dict, loop: dict | None = None, toks_per_step: dict[int, float] | None = None) -> dict:
    """Join per N: call_ms_p50, overhead, toks_per_step, realised_speedup, measured_speedup (and best N).

    toks_per_step: measured by `loop` when given, else from `toks_per_step` (e.g. expected from calibration).
    """
    rows = {}
    for n, row in sweep["trees"].items():
        tps = loop["trees"][n]["toks_per_step"] if loop else (toks_per_step or {}).get(n)
        r = {"q": row["q"], "call_ms_p50": row["call"]["p50"], "overhead": row["overhead"], "toks_per_step": tps,
             "realised_speedup": tps / (1.0 + row["overhead"]) if tps else None}
        if loop:
            r["measured_speedup"] = loop["trees"][n]["measured_speedup"]
            r["measured_over_tps"] = r["measured_speedup"] / tps
        rows[n] = r
    key = "measured_speedup" if loop else "realised_speedup"
    scored = [n for n in rows if rows[n].get(key)]
    best = max(scored, key=lambda n: rows[n][key]) if scored else None
    return {"ar_call_ms_p50": sweep["ar"]["p50"], "rows": rows, "best_n": best}


def format_table(table: dict, loop: dict | None = None) -> str:
    lines = [f"AR call p50 {table['ar_call_ms_p50']:.3f} ms"]
    if loop:
        lines.append(f"frame medians: AR {loop['ar_ms']:.2f} ms"
                     + (f", official generate {loop['official_ms']:.2f} ms (official / ours {loop['ar_over_official']:.2f})"
                        if loop.get("official_ms") else ""))
    head = f"{'N':>3} {'q':>3} {'call p50 ms':>11} {'overhead':>8} {'toks/step':>9} {'realised':>8}"
    if loop:
        head += f" {'frame ms':>9} {'measured':>8} {'meas/tps':>8}"
    lines.append(head)
    for n, r in table["rows"].items():
        tps = f"{r['toks_per_step']:9.2f}" if r["toks_per_step"] else f"{'-':>9}"
        real = f"{r['realised_speedup']:8.2f}" if r["realised_speedup"] else f"{'-':>8}"
        line = f"{n:3d} {r['q']:3d} {r['call_ms_p50']:11.3f} {r['overhead']:8.3f} {tps} {real}"
        if loop:
            line += (f" {loop['trees'][n]['frame_ms']:9.2f} {r['measured_speedup']:8.2f} "
                     f"{r['measured_over_tps']:8.2f}")
        lines.append(line)
    lines.append(f"best N: {table['best_n']}")
    return "\n".join(lines)


def environment() -> dict:
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "python": platform.python_version(),
            "machine": platform.machine(), "processor": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


# ---------------------------------------------------------------------- make bench
def demo_setup(seed: int = 0, train_frames: int = 2000, epochs: int = 3):
    """The demo's tiny structured model, trained offsets and greedy trees for every N in SIZES.

    -> predictor, drafter, trees {N: SparseTree}, table a[d][r], talker spec"""
    from .calibration import acceptance_table, greedy_tree
    from .demo import DEMO_SPEC
    from .drafters import PositionOffsets
    from .sampling import frame_uniforms
    from .tiny import build_tiny_talker, random_frame_inputs
    from .training import TrainConfig, train_drafter

    torch.manual_seed(seed)
    predictor = CodePredictor.from_talker(build_tiny_talker(DEMO_SPEC, seed=seed, dtype=torch.float32))
    gen = torch.Generator().manual_seed(seed)
    g, c0 = random_frame_inputs(DEMO_SPEC.talker_hidden_size, DEMO_SPEC.talker_vocab_size, train_frames, gen,
                                torch.float32)
    u = frame_uniforms(gen, batch=train_frames)
    codes = torch.cat((c0[:, None], decode_frame_ar(predictor, g, c0, SamplerConfig(), u).codes), dim=1)
    h = predictor.teacher_forced_hidden(g, codes)
    drafter = PositionOffsets(predictor)
    train_drafter(drafter, h, codes, TrainConfig(epochs=epochs), progress=False)
    table = acceptance_table(drafter, h, codes, width=4)
    trees = {n: greedy_tree(table, n) for n in SIZES}
    return predictor, drafter, trees, table, DEMO_SPEC


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description="Latency sweep and inner-loop comparison on the demo's tiny model")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--frames", type=int, default=100, help="frames for the inner-loop comparison")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared CPU)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="outputs/bench/latency_demo_cpu.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from .sampling import frame_uniforms
    from .tiny import random_frame_inputs

    print("building the demo model, training offsets, calibrating trees ...", flush=True)
    predictor, drafter, trees, table, spec = demo_setup(args.seed)
    print(f"call sweep: {args.warmup} warm-ups + {args.iters} calls per size ...", flush=True)
    sweep = call_sweep(predictor, drafter, trees, args.warmup, args.iters)
    gen = torch.Generator().manual_seed(args.seed + 1)
    g, c0 = random_frame_inputs(spec.talker_hidden_size, spec.talker_vocab_size, args.frames, gen, torch.float32)
    u = frame_uniforms(gen, batch=args.frames)
    print(f"inner loop: {args.frames} frames, official generate vs AR vs speculative ...", flush=True)
    loop = inner_loop(predictor, drafter, trees, g, c0, u)
    result = latency_table(sweep, loop)
    print(format_table(result, loop))
    if not all(r["identical"] for r in loop["trees"].values()):
        raise SystemExit("speculative codes differ from AR codes: losslessness broken")
    data = {"model": "demo-tiny", "environment": environment(), "args": vars(args), "sweep": sweep,
            "inner_loop": loop, "table": result}
    print(f"saved {save_json(args.out, data)}")
    return data


if __name__ == "__main__":
    main()
