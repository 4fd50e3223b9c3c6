"""The runner: every notebook in order with papermill, into `outputs/<run name>/`.

    python -m helpers params/mini.yaml [--only 03] [--from 02] [-p seed=1 -p tree_size=16]

Parameters are validated before any notebook runs. Each notebook gets `params_file` and the `-p`
overrides (it loads and checks the rest itself: `helpers.experiment.params.notebook_params`), so a notebook run
alone with the papermill CLI behaves exactly as it does here. One line per notebook with its time, and while
it runs its latest output line (build steps, progress bars: `progress.ProgressLine`); the first failure names the notebook, the error and the partially executed copy, and exits non-zero.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from helpers.experiment.metrics import run_info, update_metrics
from helpers.experiment.progress import ProgressLine
from helpers.experiment.params import REPO_ROOT, ParamsError, load_params, parse_override

NOTEBOOKS = REPO_ROOT / "notebooks"


def notebooks(only: str | None = None, start: str | None = None) -> list[Path]:
    """The numbered notebooks, in order, optionally one (`only`) or from one on (`start`), by NN prefix."""
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    numbers = [p.name[:2] for p in found]
    for flag, value in (("--only", only), ("--from", start)):
        if value is not None and value.zfill(2) not in numbers:
            raise ParamsError(f"{flag} {value}: no such notebook; available: {', '.join(numbers)}")
    if only is not None:
        return [p for p in found if p.name[:2] == only.zfill(2)]
    if start is not None:
        return [p for p in found if p.name[:2] >= start.zfill(2)]
    return found


@contextmanager
def stderr_to(path: Path):
    """Send this process's and its children's (the kernel's) stderr to a file: progress bars and library
    warnings go to the notebook's log, the console keeps one line per notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers", description=__doc__.splitlines()[0])
    ap.add_argument("params", help="a YAML file in params/ (smoke, mini, qwen3-tts-0.6b, ...)")
    ap.add_argument("--only", help="run only notebook NN")
    ap.add_argument("--from", dest="start", help="run notebooks NN and after")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (value parsed as YAML), repeatable")
    args = ap.parse_args(argv)
    params_file = Path(args.params).resolve()
    os.chdir(REPO_ROOT)                           # relative paths in params (outputs/...) are from the repo root
    try:
        overrides = dict(parse_override(o) for o in args.overrides)
        P = load_params(params_file, overrides)
        todo = notebooks(args.only, args.start)
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import papermill as pm

    # The kernels inherit this: an OpenMP thread waiting for work sleeps instead of spinning, so the miniature's
    # two-thread training is not several times slower when another process holds a core (measured).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    logging.getLogger("papermill").setLevel(logging.ERROR)   # not "Passed unknown parameter" per notebook

    out = P.run_dir.resolve()
    update_metrics(P, {"run": run_info(P)})
    print(f"run {P.run_name}: {len(todo)} notebook(s) -> {out}")
    params = {"params_file": str(params_file), **overrides}
    total = time.time()
    every = float(os.environ.get("RVQ_PROGRESS_SECONDS", "20"))     # how often a non-terminal log shows progress
    for i, nb in enumerate(todo, 1):
        target = out / nb.name
        line = ProgressLine(f"[{i}/{len(todo)}] {nb.stem} ...", every=every)
        start = time.time()
        log = out / "logs" / f"{nb.stem}.log"
        try:
            with stderr_to(log):
                pm.execute_notebook(str(nb), str(target), parameters=params, cwd=str(REPO_ROOT), progress_bar=False,
                                    kernel_name="python3", stdout_file=line, stderr_file=line)
        except pm.PapermillExecutionError as e:
            line.close("FAILED")
            print(f"error: notebook {nb.name} failed in cell {e.exec_count}: {e.ename}: {e.evalue}\n"
                  f"partial output: {target}\nlog: {log}", file=sys.stderr)
            return 1
        seconds = time.time() - start
        update_metrics(P, {"run": {"wall_s": {nb.stem: round(seconds, 1)}}})
        line.close(f"ok ({seconds:.0f} s)")
    print(f"done in {(time.time() - total) / 60:.1f} min: {out}/report.md, {out}/metrics.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
