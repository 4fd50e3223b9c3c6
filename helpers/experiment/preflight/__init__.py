"""The pre-flight: in a minute or two, before any large download, what a real-model run needs is checked.

    python -m helpers params/qwen3-tts-0.6b.yaml --check        # these checks alone; exit code 1 on a failure
    code = preflight(P)                                          # the runner's first step on the qwen3 backend

One line per check, ok / FAILED (with what to do) / skipped: CUDA (`cuda`), the checkpoint and Whisper (`models`: a
local folder's config, a hub id's metadata), one record of every dataset source (`sources`), and disk and memory
(`resources`). The mini backend builds and reads everything locally: nothing to check.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

from helpers.experiment.run.params import RunParams
from helpers.experiment.preflight.check import Check, Skipped, count, outcome, size
from helpers.experiment.preflight.cuda import check_cuda
from helpers.experiment.preflight.models import find_model
from helpers.experiment.preflight.resources import Needs, check_disk, check_memory
from helpers.experiment.preflight.sources import check_source, run_sources


def checks(P: RunParams) -> Iterator[Check]:
    """Every check of a run, in order (cheap ones first), each as it is done; none on the mini backend."""
    if P.backend == "mini":
        return
    found = {}

    def model(param: str, kind: str) -> str:
        f = found[param] = find_model(getattr(P, param), param, kind)
        return (f"{getattr(P, param)}: {f.where}, {f.config.get('model_type')} ({count(f.parameters)} parameters, "
                f"{size(f.download_bytes)} to download)")

    def resources(check):
        if len(found) < 2:
            raise Skipped("the model checks failed, so their sizes are unknown")
        return check(P, Needs.of(P, found["model_id_or_path"], found["whisper_id"]))

    yield outcome("cuda", check_cuda, P)
    yield outcome("model", model, "model_id_or_path", "tts")
    yield outcome("asr", model, "whisper_id", "asr")
    for lang, src in run_sources(P):
        yield outcome(f"data {src.param} {src.config}", check_source, P, lang, src)
    yield outcome("disk", resources, check_disk)
    yield outcome("memory", resources, check_memory)


def preflight(P: RunParams, out=None) -> int:
    """Print every check's line; 0 where none failed, 1 otherwise."""
    out = out or sys.stdout
    if P.backend == "mini":
        print("pre-flight: backend mini builds and reads everything locally; nothing to check", file=out)
        return 0
    start = time.time()
    print(f"pre-flight of {P.run_name}:", file=out, flush=True)
    found = []
    for check in checks(P):
        print(f"  {check.line()}", file=out, flush=True)
        found.append(check)
    failed = [c.name for c in found if c.failed]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "ok"
    print(f"pre-flight {verdict} ({len(found)} checks, {time.time() - start:.0f} s)", file=out, flush=True)
    return 1 if failed else 0
