"""The miniature's build as its own step: `python -m helpers.experiment.run.miniature PARAMS [-p key=value]`.

The runner runs it before the first notebook (and `python -m helpers PARAMS --build` runs only it), so that no
notebook opens on minutes of building: the `mini` backend's speech, codec and model (and its phoneme recogniser)
are built into `cache_dir/mini/` once per preset and `mini_build_seed`, and every later load reads them back. Its
progress goes to the runner's progress line and to `logs/miniature.log`. The seconds of each build step are
recorded with the build (`Mini.history["build_s"]`); notebook 00 says them.

With `--ship` (`make mini`) it builds the miniature from an empty cache, taking nothing shipped, and writes its
trained steps to `mini_trained` (`helpers.backends.mini.shipped`), which the repository commits.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def build(P) -> dict:
    """Build (or load from the cache) the run's miniature; its history (seconds per build step `build_s`, the steps
    copied from the shipped miniature `shipped`). Only for the mini backend."""
    if P.backend != "mini":
        raise ValueError(f"backend {P.backend!r} has no miniature to build (only backend 'mini' does)")
    from helpers.experiment.stages import stages
    return stages.backend(P).mini.history


def ship(P) -> Path:
    """Build the run's miniature from scratch (an empty cache, nothing shipped) and write its trained steps to
    `P.mini_trained`; that folder."""
    if not P.mini_trained:
        raise ValueError("mini_trained is empty: name the folder the trained miniature is written to")
    from helpers.backends.mini.shipped import ship as write
    from helpers.experiment.stages import stages
    Path(P.cache_dir).mkdir(parents=True, exist_ok=True)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix=".ship-", dir=P.cache_dir) as empty:
        mini = stages.backend(replace(P, cache_dir=empty, mini_trained="")).mini    # recogniser trained beside
        return write(mini, P.mini_trained, time.time() - start)


def main(argv=None) -> int:
    from helpers.experiment.run.params import ParamsError, load_params, parse_override
    from helpers.experiment.run.process import process_settings, run_threads
    from helpers.experiment.run.quiet import silence_banners
    ap = argparse.ArgumentParser(prog="python -m helpers.experiment.run.miniature",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("params")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--ship", action="store_true", help="build from scratch and write the trained steps to "
                                                        "mini_trained (make mini)")
    args = ap.parse_args(argv)
    try:
        P = load_params(args.params, dict(parse_override(o) for o in args.overrides))
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    silence_banners()
    process_settings(run_threads(P.backend))        # where this process starts (helpers.experiment.run.process)
    start = time.time()
    if args.ship:
        folder = ship(P)
        print(f"miniature {P.mini_preset} built from scratch in {time.time() - start:.0f} s; its trained steps "
              f"shipped to {P.mini_trained} ({', '.join(sorted(p.name for p in folder.iterdir()))})", flush=True)
        return 0
    history = build(P)
    shipped = f" (shipped with the repository: {', '.join(history['shipped'])})" if history["shipped"] else ""
    print(f"miniature {P.mini_preset} (mini_build_seed {P.mini_build_seed}) ready in {time.time() - start:.0f} s; "
          f"its build, seconds per step{shipped}: {history['build_s']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
