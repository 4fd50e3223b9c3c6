"""Probe (issue 23): how tokens/step follow the code predictor's sharpness, on the same miniature.

The miniature's drafters are held down by the spread of the code predictor's own distribution (notebook 03: top
probability 0.26-0.57 per position at the deployed temperature 0.9). Sampling at a lower temperature sharpens every
target p_t without touching the model, the codec or the drafters' recipe. Per temperature this runs the run's own
stages on params/mini.yaml in a run of its own (`probe-t<T>`): self-distilled drafters trained at that temperature,
calibrated, then Table 2 measured on free-running evaluation synthesis at that temperature (the walk, as notebook 04).
It prints and saves the target's mean top probability, the ideal drafter's expected tokens/step and every drafter's
expected and measured tokens/step at tree_size, overall and per language. Whether the paper's pattern (Medusa >>
offsets >> reused) appears once the targets are sharp says whether sharpness is what the miniature lacks.
`--quality-seeds n` also runs the quality stage (notebook 05) with n seeds at each temperature: the PER of AR and
speculative synthesis against the codec round trip's, per language (does the spread hold the speech down too?).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/temperature_sweep.py --temperatures 0.9,0.5,0.3
    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/temperature_sweep.py --temperatures 0.3 --quality-seeds 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from helpers.experiment import stages
from helpers.experiment.params import load_params
from helpers.experiment.quality import quality


def measure(params: str, temperature: float, tree_size: int, quality_seeds: int = 0) -> dict:
    P = load_params(params, {"temperature": temperature, "run_name": f"probe-t{temperature:g}",
                             "tree_sizes": [tree_size], "tree_size": tree_size, "wer_seeds": max(quality_seeds, 1)})
    start = time.perf_counter()
    cal, ev = stages.calibration(P), stages.evaluation(P)
    per = {}
    if quality_seeds:
        per = {lang: {"codec": row["per_codec"], **{k: sum(row[f"per_{k}"]) / len(row[f"per_{k}"])
                                                     for k in ("ar", "spec")}}
               for lang, row in quality(P)["languages"].items()}
    return {"per": per, "temperature": temperature, "tree_size": tree_size,
            "top_prob_mean": sum(cal.top_prob) / len(cal.top_prob),
            "entropy_mean": sum(cal.entropy) / len(cal.entropy),
            "ideal_expected": cal.ceiling_expected[tree_size],
            "expected": {k: v[tree_size] for k, v in cal.expected.items()},
            "measured": {k: v[tree_size] for k, v in ev.replay.items()},
            "per_language": ev.replay_by_language,
            "frames": ev.frames_compared, "identical": ev.frames_identical,
            "seconds": round(time.perf_counter() - start, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--temperatures", default="0.9,0.5,0.3")
    ap.add_argument("--tree-size", type=int, default=32)
    ap.add_argument("--quality-seeds", type=int, default=0, help="0: no quality stage")
    ap.add_argument("--out", default="outputs/probes/temperature_sweep.json")
    args = ap.parse_args()
    rows = []
    for t in (float(x) for x in args.temperatures.split(",")):
        rows.append(measure(args.params, t, args.tree_size, args.quality_seeds))
        print(json.dumps(rows[-1]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
