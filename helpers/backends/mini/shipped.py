"""The trained miniature committed with the repository: its costly steps, copied out of a build.

    ship(mini, "outputs/mini-trained")     # make mini: the codec, model and recogniser steps of a fresh build

A shipped folder holds the steps exactly as `cached_step` wrote them (`<name>-<key>/`, with `params.json`,
`build.json` and the training history), so `build_mini(..., shipped=folder)` takes a step from it only where the
key, which hashes every parameter and the speech's content, is the one the build would make: code and weights cannot
drift apart. The speech itself (espeak-ng, bit-reproducible, half a minute) is not shipped: it is large and cheap.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from helpers.artifacts import atomic_folder, build_seconds, load_json, save_json
from helpers.backends.mini.build import Mini
from helpers.backends.mini.phoneme_asr import recogniser_folder

SHIPPED_STEPS = ("codec", "model", "recogniser")


def ship(mini: Mini, dest: str | Path, seconds: float) -> Path:
    """Replace `dest` with the codec, model and recogniser steps of `mini` (a complete build, recogniser included)
    and a README saying where they came from; `seconds`: the whole build's wall time."""
    mini.recogniser()                                # trained here if it is not yet
    speech = mini.folders["speech"]
    folders = dict(codec=mini.folders["codec"], model=mini.folders["model"],
                   recogniser=recogniser_folder(mini.config.recogniser, speech, speech.parent))

    def write(tmp: Path) -> None:
        for folder in folders.values():
            shutil.copytree(folder, tmp / folder.name)
        m = manifest(mini, folders, seconds)
        save_json(tmp / "manifest.json", m)
        (tmp / "README.md").write_text(readme(m))

    return atomic_folder(dest, write)


def manifest(mini: Mini, folders: dict[str, Path], seconds: float) -> dict:
    """What a shipped folder holds: each step's folder (its key) and build seconds, the build's numerical paths, the
    speech step it was trained on, the training's held-out curves."""
    history = load_json(folders["model"] / "history.json")
    return dict(built=time.strftime("%Y-%m-%d"), build_seconds=round(seconds), preset_seed=mini.config.seed,
                speech=mini.folders["speech"].name, numerics=load_json(folders["model"] / "numerics.json"),
                steps={name: dict(folder=f.name, seconds=build_seconds(f)) for name, f in folders.items()},
                validation=history.get("validation", []))


def readme(m: dict) -> str:
    """The shipped folder's README (generated from its manifest)."""
    rows = "\n".join(f"| {name} | `{s['folder']}` | {s['seconds']} |" for name, s in m["steps"].items())
    n = m["numerics"]
    paths = f"ATen {n['aten']}, OpenBLAS {'/'.join(n['openblas'])}, MKL_CBWR {n['mkl_cbwr']}"
    return f"""# The trained miniature (written by `make mini`; do not edit)

Built {m['built']} from an empty cache in {m['build_seconds']} s by `make mini` (`python -m helpers
params/mini.yaml --ship`), on the speech step `{m['speech']}`, with the numerical paths {paths}.
`make run` copies these steps into its cache instead of training them where their keys (every build parameter and
the speech's content) match the code's; otherwise it builds them. `tests/test_mini_shipped.py` checks that they
match.

| step | folder (its key) | build seconds |
|---|---|---|
{rows}

Each folder keeps what its build wrote: `params.json` (what the key hashes), `build.json` (seconds),
`history.json` (the training curves: notebook 01 plots the model's), and the weights as safetensors.
`manifest.json` has the model's held-out cross-entropy curve too.
"""
