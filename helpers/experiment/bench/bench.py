"""`make bench`: the latency sweep and the whole-frame comparison on the miniature, printed and saved.

    python -m helpers.experiment.bench.bench [--params params/mini.yaml] [--calls 200] [--frames 200]
                                             [--compile inductor] [--compiled-sizes 4 8 16]

It reuses the cached stages of the params' run (the miniature, trained drafters, calibration tables, shared
with `make run`; built if absent) and saves outputs/bench/latency_mini_cpu.json. Then, in one process each:
- every CPU deployment (dtype x kernel, `measure.deployments`) on the miniature: the fused call per N, whole frames
  (official generate, AR and speculative per deployment), where the best one's call spends its time;
- the miniature at the real code predictor's size (`adapter.full_size`): whole frames of every CPU deployment, AR and
  speculative at N = 4, 8, 16 (`measure.full_size_frames`), saved under "full_size";
- Figure 4 for this CPU at the exact 0.6B shape (random weights): every deployment, eager and compiled, per N
  (`measure.deployments.real_shape_grid`), saved as outputs/bench/cpu_0.6b.json (notebook 06 and report.md read it);
- kernels (dispatched ops) per AR step and per round, host reads per frame of each decoder (`measure.kernel_counts`:
  a captured graph's cost on a GPU, counted on any machine);
- compiled against eager (`measure.compiled_latency`): the official generate, our AR loop eager and compiled, our
  speculative loop eager and compiled per N (per-frame p50, every ratio, compile time apart), the compiled round.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch

from helpers.artifacts import save_json
from helpers.experiment.stages import stages
from helpers.experiment.run.backend_factory import deployment_dtype
from helpers.experiment.bench.deployment_bench import deployment_comparison, full_size_comparison
from helpers.experiment.run.params import load_params, parse_override
from helpers.experiment.run.process import process_settings
from helpers.experiment.run.quiet import silence_banners
from helpers.measure.compiled_latency import (compiled_round_profile, format_round_profile, format_side_by_side,
                                             side_by_side)
from helpers.measure.deployments import format_frames, format_grid, format_phases, real_shape_grid
from helpers.measure.floor import format_floor, host_floor, matmul_floor
from helpers.adapter.full_size import full_size
from helpers.measure.full_size_frames import format_full_size
from helpers.method.predictor import CodePredictor
from helpers.measure.kernel_counts import format_kernel_counts, kernel_counts
from helpers.measure.latency import SIZES, format_table, latency_metrics
from helpers.measure.machine import load_average, machine, timed_on
from helpers.measure.profile import format_profile
from helpers.method.calibration import greedy_tree
from helpers.method.compiler import COMPILE_MODES
from helpers.method.sampler import SamplerConfig, frame_uniforms


def mini_setup(params: str = "params/mini.yaml", frames: int = 200, overrides: dict | None = None):
    """The run of `params` (its cached stages: the miniature, trained drafters, calibration tables, shared with
    `make run`): the main drafter and its code predictor as deployed, greedy trees for every N in SIZES, and
    real frames (teacher-forced validation utterances).

    -> predictor, drafter, trees {N: SparseTree}, table a[d][r], g [F, H_talker], c0 [F]"""
    P = load_params(params, overrides)
    predictor, drafter = stages.inner_loop_in(P, deployment_dtype(P))
    table = stages.calibration(P).tables[stages.main_drafter(P)]
    g, _, codes = stages.teacher_forced(P, "validation")
    return (predictor, drafter, {n: greedy_tree(table, n) for n in SIZES}, table, g[:frames].to(predictor.dtype),
            codes[:frames, 0])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description="Latency sweep and whole-frame comparison on the miniature (make bench)")
    ap.add_argument("--params", default="params/mini.yaml", help="the run whose miniature and drafters are timed")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200, help="timed calls per size")
    ap.add_argument("--frames", type=int, default=200, help="real frames for the whole-frame comparison")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: fastest for these small matrices)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", default="inductor", choices=COMPILE_MODES,
                    help="compiled systems beside the eager ones (none: skip them)")
    ap.add_argument("--compiled-sizes", type=int, nargs="+", default=[2, 4, 8],
                    help="tree sizes of the side-by-side run, greedy trees from the calibration table (each compiled "
                         "system costs ~1 min of compilation; small trees pay best on a CPU: docs/speed.md)")
    ap.add_argument("--side-frames", type=int, default=100, help="frames of the side-by-side run")
    ap.add_argument("--full-size-frames", type=int, default=12,
                    help="whole frames of the miniature at the real code predictor's size, every deployment (0: skip)")
    ap.add_argument("--engine-threads", type=int, nargs="+", default=None,
                    help="thread counts of the full-size engines table (default: --threads and every core)")
    ap.add_argument("--real-rounds", type=int, default=40,
                    help="rounds of the 0.6B-shape grid (0: skip it; every deployment and N once a round)")
    ap.add_argument("--real-out", default="outputs/bench/cpu_0.6b.json")
    ap.add_argument("--real-only", action="store_true", help="only the 0.6B-shape grid (no miniature needed)")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a parameter over the params file (as for python -m helpers), e.g. -p cache_dir=...")
    ap.add_argument("--out", default="outputs/bench/latency_mini_cpu.json")
    args = ap.parse_args(argv)
    silence_banners()                    # the libraries' known import banners (SoX's, when the miniature loads)
    if min(args.compiled_sizes) < 1:
        ap.error(f"--compiled-sizes {args.compiled_sizes}: each must be a tree size of at least 1")
    overrides = dict(parse_override(o) for o in args.overrides)
    process_settings(args.threads)       # where this process starts: its torch threads (helpers.experiment.run.process)
    if args.real_only:
        return {"real": real_shape(args.real_rounds or 40, args.real_out)}
    start = time.perf_counter()
    print("loading the miniature, its trained drafters and calibration (built and cached if absent) ...", flush=True)
    predictor, drafter, trees, table, g, c0 = mini_setup(args.params, frames=args.frames, overrides=overrides)
    print(f"sweep ({args.warmup} warm-ups + {args.calls} calls per size) and {g.shape[0]} whole frames "
          f"(official generate, AR, speculative per N) ...", flush=True)
    metrics = latency_metrics(predictor, drafter, trees, g, c0, calls=args.calls, warmup=args.warmup, seed=args.seed)
    print(format_table(metrics))
    print("where the time goes, ms per AR step / per round (+: more than the AR step):")
    print(format_profile(metrics["profile"]))
    best = metrics["by_n"][metrics["best_n"]]
    print(f"at N = {metrics['best_n']}: measured speedup {best['measured_speedup']:.2f} / measured tokens/step "
          f"{best['tokens_per_step']:.2f} = {best['measured_over_tps']:.2f}")
    if not all(r["identical"] for r in metrics["by_n"].values()):
        raise SystemExit("speculative codes differ from AR codes: losslessness broken")
    data = {"model": "mini", "environment": machine(), "args": vars(args), "acceptance": table.tolist(),
            "trees": {n: [list(p) for p in tree.paths] for n, tree in trees.items()}, "metrics": metrics,
            "seconds": time.perf_counter() - start}
    save_json(args.out, data)                                   # the eager part is saved before the compiled run
    u = frame_uniforms(torch.Generator().manual_seed(args.seed), predictor.num_codes, batch=10, device=predictor.device)
    data["kernels"] = kernel_counts(predictor, drafter, {n: trees[n] for n in (4, 16, 32) if n in trees}, g[:10],
                                    c0[:10], u)
    print("what a GPU will pay for, counted here:\n" + format_kernel_counts(data["kernels"]))
    save_json(args.out, data)
    print("every CPU deployment on the miniature (dtype x kernel): calls per N, whole frames, phases ...", flush=True)
    P = load_params(args.params, overrides)
    data["deployments"] = deployment_comparison(
        P, trees, g[:args.side_frames], c0[:args.side_frames], seed=args.seed,
        compiled_sizes=(8,) if args.compile == "inductor" else ())     # the dense dtypes' compiled loops beside
    print(format_grid(data["deployments"]["calls"]))
    print(format_frames(data["deployments"]["frames"]))
    print(format_phases(data["deployments"]["phases"]))
    save_json(args.out, data)
    if args.full_size_frames:
        P = load_params(args.params, {**overrides, "full_size_frames": args.full_size_frames})
        counts = sorted(set(args.engine_threads or (args.threads, os.cpu_count() or 1)))
        data["full_size_by_threads"] = engines(P, trees, g, c0, counts)
        data["full_size"] = data["full_size_by_threads"][args.threads if args.threads in counts else counts[0]]
        torch.set_num_threads(args.threads)
        save_json(args.out, data)
    if args.real_rounds:
        data["real"] = real_shape(args.real_rounds, args.real_out)
    compiled_trees = {n: greedy_tree(table, n) for n in args.compiled_sizes}
    data["side_by_side"], data["compiled_profile"] = compiled_comparison(
        predictor, drafter, compiled_trees, g[:args.side_frames], c0[:args.side_frames],
        args.compile, args.seed)
    data["seconds"] = time.perf_counter() - start
    saved = save_json(args.out, data)
    side = data["side_by_side"]
    if any(r["identical"] is not None and r["identical"] != side["frames"] for r in side["systems"].values()):
        raise SystemExit(f"compiled codes differ from the eager AR codes: see {saved}")
    print(f"saved {saved} ({data['seconds']:.0f} s)")
    return data


def engines(P, trees, g, c0, thread_counts) -> dict:
    """The engines table at each thread count: llama.cpp first (where `make peers` installed it), then the full-size
    frames of every deployment with the peers beside them (`measure.full_size_frames`; at the first thread count every
    speculative loop counted against its AR loop on `P.full_size_identity_frames` frames), printed.
    -> {threads: table}"""
    from helpers.experiment.run.backend_factory import backend
    from helpers.measure.peers.table import measure_llama

    big = full_size(backend(P).model.talker)
    llama = measure_llama(CodePredictor.from_talker(big.talker), thread_counts)
    print("llama.cpp: " + (f"measured ({llama['build']})" if llama else "not installed (`make peers` builds it); "
                           "its rows come from the committed reference"), flush=True)
    out = {}
    for threads in thread_counts:
        gc.collect()                                # the last pass's decoders and sessions (GBs) let go first
        torch.set_num_threads(threads)
        print(f"the miniature at the real code predictor's size, {threads} thread(s): every deployment, "
              f"{P.full_size_frames} whole frames, the peers beside (minutes) ...", flush=True)
        out[threads] = full_size_comparison(P, trees, g, c0, identity_all=threads == thread_counts[0])
        print(format_full_size(out[threads]))
    return out


def real_shape(rounds: int, out: str) -> dict:
    """Figure 4 for this CPU at the 0.6B shape (`measure.deployments.real_shape_grid`), printed and saved to `out`."""
    print(f"Figure 4 at the 0.6B shape, every deployment, {rounds} rounds (minutes) ...", flush=True)
    start, load = time.perf_counter(), load_average()
    real = real_shape_grid(rounds=rounds)
    real["environment"] = timed_on(load)                 # with the load average at its start and end
    real["seconds"] = time.perf_counter() - start
    print(format_grid(real))
    print(format_phases(real["phases"]))
    print(f"saved {save_json(out, real)}")
    return real


def compiled_comparison(predictor, drafter, trees, g, c0, compile: str = "inductor", seed: int = 0,
                        sampler: SamplerConfig = SamplerConfig()) -> tuple[dict, dict | None]:
    """The side-by-side run (official, AR and speculative, eager and compiled) and the compiled round's parts,
    printed. -> (side_by_side dict, compiled_round_profile dict or None when compile is "none")."""
    u = frame_uniforms(torch.Generator().manual_seed(seed), predictor.num_codes, batch=g.shape[0],
                       device=predictor.device)
    print(f"side by side, {g.shape[0]} frames, compile={compile}, N in {list(trees)} "
          f"(compilation first, booked apart) ...", flush=True)
    both = side_by_side(predictor, drafter, trees, g, c0, u, sampler, compile, seed=seed)
    print(format_side_by_side(both))
    rows, ratios = both["systems"], both["ratios"]
    best_ar, best_spec = both["fastest_ar"], both["fastest_spec"]
    tps = rows[best_spec]["tokens_per_step"]
    print(f"fastest AR / official {ratios[best_ar]['official']:.2f}; fastest speculative / fastest AR "
          f"{ratios[best_spec][best_ar]:.2f}, / official {ratios[best_spec]['official']:.2f}; "
          f"speedup / tokens/step {ratios[best_spec][best_ar] / tps:.2f}")
    profile = None
    if compile != "none":
        profile = compiled_round_profile(predictor, drafter, trees, sampler, compile)
        print("the compiled round's parts (per call at t = 1):")
        print(format_round_profile(profile))
        profile["floor"], profile["host"] = matmul_floor(predictor), host_floor(predictor.device)
        print(format_floor(profile["floor"], profile["host"]))
    return both, profile


if __name__ == "__main__":
    main()
