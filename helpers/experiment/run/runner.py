"""The runner: every notebook in order with papermill, into `outputs/<run name>/`.

    python -m helpers params/mini.yaml [--only 03] [--from 02] [--build] [--check] [-p seed=1 -p tree_size=16]

Parameters are validated before any notebook runs; on the qwen3 backend the pre-flight then checks the datasets,
models, CUDA, disk and memory (`helpers.experiment.preflight`; `--check`: only that, `--no-check`: skip it). On the mini backend the miniature is built (or found in the
cache) first, as its own step (`helpers.experiment.run.miniature`; `--build`: only that step). Each notebook gets `params_file` and the `-p`
overrides (it loads and checks the rest itself: `helpers.experiment.run.params.notebook_params`), so a notebook run
alone with the papermill CLI behaves exactly as it does here. One line per notebook with its time, and while
it runs its latest output line (build steps, progress bars: `progress.ProgressLine`; the kernel writes bars and build
notes to the notebook's log, `quiet.route_progress`, so the executed notebook holds none); the first failure names the notebook, the error and the partially executed copy, and exits non-zero.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from helpers.artifacts import atomic_write
from helpers.backends.mini.numerics import build_env
from helpers.experiment.run.metrics import run_info, update_metrics
from helpers.experiment.run.progress import LogTail, ProgressLine
from helpers.experiment.run.params import REPO_ROOT, ParamsError, load_params, parse_override
from helpers.experiment.run.quiet import PROGRESS_ENV

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
    with open(path, "a") as f:                   # appended: the kernel appends its progress to the same file
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@contextmanager
def environment(name: str, value: str):
    """os.environ[name] = value inside the block (the kernel started there inherits it), restored after."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def shown(path: Path) -> str:
    """A path relative to the project where it lies inside it (what a notebook's parameters cell shows)."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def build_miniature(params_file: str, overrides: list[str], log: Path, every: float, ship: bool = False) -> int:
    """The miniature's build step in its own process, its output on one progress line and in `log`; its exit code.
    ship: build from scratch and write the trained steps to `mini_trained` (`make mini`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    line = ProgressLine("miniature ...", every=every)
    start = time.time()
    command = [sys.executable, "-m", "helpers.experiment.run.miniature", params_file]
    command += [a for o in overrides for a in ("-p", o)] + (["--ship"] if ship else [])
    with open(log, "w") as f:
        child = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 env=build_env())                 # the build's numerical paths (numerics.py)
        while chunk := os.read(child.stdout.fileno(), 65536):
            text = chunk.decode("utf-8", errors="replace")
            f.write(text)
            f.flush()
            line.write(text)
        code = child.wait()
    line.close(f"ok ({time.time() - start:.0f} s)" if code == 0 else f"FAILED (exit code {code}; log: {log})")
    return code


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers", description=__doc__.splitlines()[0])
    ap.add_argument("params", help="a YAML file in params/ (smoke, mini, qwen3-tts-0.6b, ...)")
    ap.add_argument("--only", help="run only notebook NN")
    ap.add_argument("--from", dest="start", help="run notebooks NN and after")
    ap.add_argument("--build", action="store_true", help="only build the miniature (mini backend), no notebook")
    ap.add_argument("--ship", action="store_true", help="only build the miniature from scratch and write its "
                                                        "trained steps to mini_trained (make mini), no notebook")
    ap.add_argument("--check", action="store_true", help="only the pre-flight (datasets, models, CUDA, disk and "
                                                         "memory: helpers.experiment.preflight), no notebook")
    ap.add_argument("--no-check", dest="no_check", action="store_true",
                    help="skip the pre-flight that opens a qwen3 run (a rerun whose checks passed)")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (value parsed as YAML), repeatable")
    args = ap.parse_args(argv)
    params_file = Path(args.params).resolve()
    os.chdir(REPO_ROOT)                           # relative paths in params (outputs/...) are from the repo root
    try:
        overrides = dict(parse_override(o) for o in args.overrides)
        P = load_params(params_file, overrides)
        todo = notebooks(args.only, args.start)
        if (args.build or args.ship) and P.backend != "mini":
            raise ParamsError(f"--build and --ship build the miniature: they need backend mini, not {P.backend!r}")
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check or (P.backend != "mini" and not args.no_check):
        from helpers.experiment.preflight import preflight
        if preflight(P) != 0:
            print("error: the pre-flight failed (its FAILED lines say what to do)", file=sys.stderr)
            return 1
        if args.check:
            return 0
    import papermill as pm

    # The kernels inherit this: an OpenMP thread waiting for work sleeps instead of spinning, so the miniature's
    # two-thread training is not several times slower when another process holds a core (measured).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    logging.getLogger("papermill").setLevel(logging.ERROR)   # not "Passed unknown parameter" per notebook

    out = P.run_dir.resolve()
    every = float(os.environ.get("RVQ_PROGRESS_SECONDS", "20"))     # how often a non-terminal log shows progress
    total = time.time()
    if P.backend == "mini" and build_miniature(shown(params_file), args.overrides, out / "logs" / "miniature.log",
                                               every, args.ship) != 0:
        return 1
    if args.build or args.ship:
        return 0
    update_metrics(P, {"run": {**run_info(P), "runner": True}})
    print(f"run {P.run_name}: {len(todo)} notebook(s) -> {out}")
    params = {"params_file": shown(params_file), **overrides}
    for i, nb in enumerate(todo, 1):
        target = out / nb.name
        line = ProgressLine(f"[{i}/{len(todo)}] {nb.stem} ...", every=every)
        start = time.time()
        log = out / "logs" / f"{nb.stem}.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("")
            with stderr_to(log), environment(PROGRESS_ENV, str(log)), LogTail(log, line):
                pm.execute_notebook(str(nb), str(target), parameters=params, cwd=str(REPO_ROOT), progress_bar=False,
                                    kernel_name="python3", stdout_file=line, stderr_file=line)
        except pm.PapermillExecutionError as e:
            line.close("FAILED")
            print(f"error: notebook {nb.name} failed in cell {e.exec_count}: {e.ename}: {e.evalue}\n"
                  f"partial output: {target}\nlog: {log}", file=sys.stderr)
            return 1
        seconds = time.time() - start
        relative_paths(target, P)
        update_metrics(P, {"run": {"wall_s": {nb.stem: round(seconds, 1)}}})
        line.close(f"ok ({seconds:.0f} s)")
    print(f"done in {(time.time() - total) / 60:.1f} min: {out}/report.md, {out}/metrics.json")
    return 0


def relative_paths(notebook: Path, P) -> None:
    """The executed notebook's papermill metadata names its input and output as the notebooks show paths (relative
    to the project, or to the run's folders), not as this machine's absolute paths."""
    import nbformat

    from helpers.experiment.run.setup import shown_path
    nb = nbformat.read(notebook, as_version=4)
    meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if meta.get(key):
            meta[key] = shown_path(meta[key], P)
    atomic_write(notebook, lambda tmp: nbformat.write(nb, str(tmp)))


if __name__ == "__main__":
    sys.exit(main())
