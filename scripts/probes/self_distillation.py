"""Probe (issue 23): do drafters trained on the code predictor's own samples beat drafters trained on the codec's codes?

Acceptance is measured on free-running synthesis, whose codes are the code predictor's samples, not the codec's. Where
the predictor is far from its data (the miniature's: held-out CE 1.7 nats a code) a drafter trained on the codec's codes
learns the data's distribution, not the one it must guess. Medusa-2's self-distillation trains on the model's own
outputs instead. Here: c1..c15 sampled by the predictor (the run's sampler) from the teacher-forced (g, c0) of the
train and validation roles, `--draws` draws per frame (the run's `drafter_targets: samples` takes one); drafters
trained on them with the stage's recipe (early stopping, the learning rates the run's sweep chose); every drafter then
calibrated on free-running calibration synthesis (greedy tree, N = tree_size) and measured on the run's AR evaluation
frames by the walk (`walk_calls`, as Table 2). `--labels distributions` trains on the predictor's sampling
distributions along the draws instead of the draws (soft labels, the run's `drafter_targets: distributions`);
`--fraction` keeps the first part of the train frames (does the drafter want more frames?).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/self_distillation.py --kinds medusa --draws 2 --out outputs/probes/sd-medusa.json
    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/self_distillation.py --kinds medusa --draws 1 --labels distributions --fraction 0.5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import helpers  # noqa: F401  (first: its numerical pins take effect only before numpy and torch load)
import torch

from helpers.adapter.synthesis import Synthesis
from helpers.experiment import stages
from helpers.experiment.params import load_params
from helpers.method.calibration import expected_tokens_per_step, greedy_tree, uncapped_table
from helpers.method.decoding import SpeculativeDecoder
from helpers.method.drafters import make_drafter
from helpers.method.replay import teacher_forced_states, walk_calls
from helpers.method.training import TrainConfig, sampled_targets, train_drafter


def sampled_codes(P, g: torch.Tensor, codes: torch.Tensor, draws: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """g repeated `draws` times [draws F, H_talker] and codes [draws F, 16]: c0 as given, c1..c15 the predictor's
    (`training.sampled_targets`, the run's `drafter_targets: samples` with one draw)."""
    gen = torch.Generator().manual_seed(seed)
    predictor = stages.backend(P).predictor
    return g.repeat(draws, 1), torch.cat([sampled_targets(predictor, g, codes, stages.sampler(P), gen)
                                          for _ in range(draws)])


def measure(P, drafter, cal_states, cal_codes, ev_states, ar) -> dict:
    predictor = stages.backend(P).predictor
    a = uncapped_table(drafter, cal_states[drafter.prenorm], cal_codes, max(P.tree_sizes), P.acceptance_width)
    tree = greedy_tree(a, P.tree_size)
    dec = SpeculativeDecoder(predictor, drafter, tree, stages.sampler(P))
    return {"top1": a[:, 0].tolist(), "expected": expected_tokens_per_step(tree, a),
            "measured": walk_calls(dec, ar, ev_states[drafter.prenorm]).tokens_per_step(predictor.num_codes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--kinds", default="medusa,offsets,offsets_prenorm")
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--labels", choices=("draws", "distributions"), default="draws")
    ap.add_argument("--fraction", type=float, default=1.0, help="of the train frames kept (the first ones)")
    ap.add_argument("--seed", type=int, default=123)
    ap.add_argument("--out", default="outputs/probes/self_distillation.json")
    args = ap.parse_args()
    P = load_params(args.params, overrides={"drafter_targets": "codec"})     # the rows "codec": the paper's targets
    predictor = stages.backend(P).predictor
    trained = stages.drafters(P)
    start = time.perf_counter()
    data = {}
    for role, seed in (("train", args.seed), ("validation", args.seed + 1)):
        g, _, codes = stages.teacher_forced(P, role)
        gs, cs = sampled_codes(P, g, codes, args.draws, seed)
        data[role] = (teacher_forced_states(predictor, [Synthesis(cs, gs, [])]), cs)
    print(f"sampled and teacher-forced in {time.perf_counter() - start:.0f} s", flush=True)
    cal_runs = [stages.synthesis_job(P, stages.SynthesisJob("calibration", i, P.seed + stages.CALIBRATION_SEED + i, "ar"))
                for i in range(len(stages.samples(P, "calibration")))]
    cal_codes = torch.cat([r.codes for r in cal_runs])
    cal_states = teacher_forced_states(predictor, cal_runs)
    ar, _ = stages.syntheses(P)
    ev_states = teacher_forced_states(predictor, ar)
    print(f"calibration synthesis ({len(cal_codes)} frames) in {time.perf_counter() - start:.0f} s", flush=True)
    result = {"draws": args.draws, "labels": args.labels, "fraction": args.fraction, "codec": {}, "samples": {}}
    for kind in ["reused"] + args.kinds.split(","):
        result["codec"][kind] = measure(P, trained.drafters[kind], cal_states, cal_codes, ev_states, ar)
        print(kind, "codec targets", result["codec"][kind], flush=True)
    for kind in args.kinds.split(","):
        d = make_drafter(kind, predictor, P.depth)
        lr = trained.training[kind]["lr"]
        t0 = time.perf_counter()
        (s, cs), (sv, csv) = data["train"], data["validation"]
        m = round(len(cs) * args.fraction)
        soft = stages.sampler(P) if args.labels == "distributions" else None
        cfg = TrainConfig(P.drafter_epochs, lr, P.drafter_batch_size, P.seed, P.drafter_patience, soft)
        r = train_drafter(d, s[d.prenorm][:m], cs[:m], cfg, progress=False, val=(sv[d.prenorm], csv))
        result["samples"][kind] = {**measure(P, d, cal_states, cal_codes, ev_states, ar), "lr": lr,
                                   "best_epoch": r.best_epoch, "val_loss": r.val_loss,
                                   "seconds": round(time.perf_counter() - t0, 1)}
        print(kind, "sample targets", result["samples"][kind], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
