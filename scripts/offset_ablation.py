"""Where the offsets enter (issue 14 item 4), on a run's cached stages: after the final norm or before it.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/offset_ablation.py [--params params/mini.yaml] [-p KEY=VALUE] [--evaluate]

Builds (or loads) the run's drafters and calibration stages (`helpers.experiment.stages.stages`; the same artifacts
`make run` uses) and prints, per drafter: added parameters, teacher-forced validation top-1 per depth, the
calibration set's expected tokens/step at N = tree_size, and the main drafter chosen from it
(`stages.main_drafter_choice`). --evaluate also runs the evaluation stage (free-running AR and speculative
synthesis of every evaluation utterance, minutes on the miniature) and prints the measured tokens/step there.
-p overrides a parameter as `python -m helpers` does (e.g. cache_dir=, output_dir=). Writes the numbers as JSON to
<run_dir>/offset_ablation.json; its numbers are the run's own (`metrics.json`: drafters.*, main_drafter), read from
the same cached stages.
"""

from __future__ import annotations

import argparse
import json

from helpers.artifacts import save_json
from helpers.experiment.stages import stages
from helpers.experiment.run.params import load_params, parse_override
from helpers.experiment.run.process import process_settings, run_threads


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--evaluate", action="store_true", help="also measure tokens/step on the evaluation set")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (value parsed as YAML), repeatable")
    args = ap.parse_args(argv)
    P = load_params(args.params, dict(parse_override(o) for o in args.overrides))
    process_settings(run_threads(P.backend))        # where this process starts (helpers.experiment.run.process)
    trained, cal = stages.drafters(P, progress=False), stages.calibration(P)
    n = P.tree_size
    rows = {k: {"added_params": d.added_params, "validation_top1": [a[0] for a in trained.validation[k]],
                "expected_tokens_per_step": cal.expected[k][n]} for k, d in trained.drafters.items()}
    if args.evaluate:
        ev = stages.evaluation(P)
        for k in rows:
            rows[k]["tokens_per_step"] = ev.replay[k][n]
    result = {"params": args.params, "tree_size": n, "calibration_frames": cal.frames, "drafters": rows,
              "main_drafter": stages.main_drafter_choice(P)}
    save_json(P.run_dir / "offset_ablation.json", result)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
