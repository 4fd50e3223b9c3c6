"""`make bench`: the latency sweep and the whole-frame comparison on the miniature, printed and saved.

    python -m helpers.experiment.bench [--params params/mini.yaml] [--calls 200] [--frames 200]

It reuses the cached stages of the params' run (the miniature, trained drafters, calibration tables, shared
with `make run`; built if absent) and saves outputs/bench/latency_mini_cpu.json.
"""

from __future__ import annotations

import argparse
import time

import torch

from helpers.artifacts import save_json
from helpers.experiment import stages
from helpers.experiment.params import load_params
from helpers.measure.latency import SIZES, environment, format_table, latency_metrics
from helpers.measure.profile import format_profile
from helpers.method.calibration import greedy_tree


def mini_setup(params: str = "params/mini.yaml", frames: int = 200):
    """The run of `params` (its cached stages: the miniature, trained drafters, calibration tables, shared with
    `make run`): the main drafter and its code predictor as deployed, greedy trees for every N in SIZES, and
    real frames (teacher-forced validation utterances).

    -> predictor, drafter, trees {N: SparseTree}, table a[d][r], g [F, H_talker], c0 [F]"""
    P = load_params(params)
    predictor, drafter = stages.deployed(P)
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
    ap.add_argument("--out", default="outputs/bench/latency_mini_cpu.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    print("loading the miniature, its trained drafters and calibration (built and cached if absent) ...", flush=True)
    predictor, drafter, trees, table, g, c0 = mini_setup(args.params, frames=args.frames)
    torch.set_num_threads(args.threads)
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
    data = {"model": "mini", "environment": environment(), "args": vars(args), "acceptance": table.tolist(),
            "trees": {n: [list(p) for p in tree.paths] for n, tree in trees.items()}, "metrics": metrics,
            "seconds": time.perf_counter() - start}
    print(f"saved {save_json(args.out, data)} ({data['seconds']:.0f} s)")
    return data


if __name__ == "__main__":
    main()
