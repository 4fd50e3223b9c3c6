"""Safe artifacts: atomic writes, safetensors and JSON only, and a cache keyed by the parameters.

A reader never sees a half-written file: everything is written under a temporary name in the same
folder and renamed. A cached step is a folder `<root>/<name>-<key>/` where `key` hashes the
parameters that made it; it is built in a temporary folder and renamed when complete, so an
interrupted build leaves nothing that looks finished.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_path), then rename tmp_path to path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_folder(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_folder) (an empty folder beside `path`), then put it in place of `path` (replacing a
    leftover): a folder on disk is always complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent))   # same extension
    try:
        write(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return path


def save_json(path, obj: Any) -> Path:
    return atomic_write(path, lambda p: p.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"))


def load_json(path) -> Any:
    return json.loads(Path(path).read_text())


def save_tensors(path, tensors: dict[str, torch.Tensor]) -> Path:
    return atomic_write(path, lambda p: save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()},
                                                  str(p)))


def load_tensors(path, device: str = "cpu") -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in load_file(str(path)).items()}


def params_key(params: Any) -> str:
    """Short stable hash of JSON-serialisable parameters."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def step_folder(root, name: str, params: Any) -> Path:
    """Where `cached_step(root, name, params, ...)` keeps its artifacts."""
    return Path(root) / f"{name}-{params_key(params)}"


def step_cached(root, name: str, params: Any) -> bool:
    """Whether that step is built (its params.json, written last, marks the folder complete)."""
    return (step_folder(root, name, params) / "params.json").exists()


def step_ready(root, name: str, params: Any, shipped=None) -> bool:
    """Whether `cached_step(root, name, params, ..., shipped=shipped)` would load or copy the step, not build it."""
    return step_cached(root, name, params) or (shipped is not None and step_cached(shipped, name, params))


_NOTES: dict = {"sink": None}


def note(line: str) -> None:
    """A build step's status line ("speech: cached (...)"): printed, or appended to the sink `set_note_sink` named
    (under the runner: the notebook's log, shown as its progress line, not kept in the notebook)."""
    print(line, file=_NOTES["sink"] or sys.stdout, flush=True)


def set_note_sink(stream) -> None:
    """Where `note` writes from now on (None: stdout)."""
    _NOTES["sink"] = stream


def _short(folder: Path) -> str:
    """A step's folder as its build note names it: its root's name and its own ("artifacts/drafters-9942629d7981"),
    never the machine's absolute path (in JupyterLab the note is a notebook output)."""
    return f"{folder.parent.name}/{folder.name}"


def cached_step(root, name: str, params: Any, build: Callable[[Path], None], log: Callable[[str], None] = note,
                shipped: str | os.PathLike | None = None) -> Path:
    """The folder `<root>/<name>-<key(params)>`, built by build(tmp_folder) unless it already exists, or copied from
    `shipped` (a folder of finished steps committed with the repository) where a step of the same key lies there.

    The folder also records how long its build took (`build.json`: seconds, see `build_seconds`)."""
    final = step_folder(root, name, params)
    if step_cached(root, name, params):
        log(f"{name}: cached ({_short(final)})")
        return final
    if shipped is not None and step_cached(shipped, name, params):
        source = step_folder(shipped, name, params)
        log(f"{name}: shipped ({_short(source)})")

        def copy(tmp: Path) -> None:
            shutil.copytree(source, tmp, dirs_exist_ok=True)
            save_json(tmp / SHIPPED_MARK, {"from": str(source)})

        return atomic_folder(final, copy)

    def write(tmp: Path) -> None:
        start = time.perf_counter()
        build(tmp)
        save_json(tmp / "build.json", {"seconds": round(time.perf_counter() - start, 1)})
        save_json(tmp / "params.json", params)                     # last: marks the folder complete

    return atomic_folder(final, write)


def content_key(*files: str | os.PathLike) -> str:
    """Short hash of the files' bytes, for a key that must change when a step's input does, not only its parameters
    (a shipped step is taken only for the same input). Each file is read once per size and modification time."""
    digest = hashlib.sha256()
    for file in map(Path, files):
        stat = file.stat()
        digest.update(_file_digest(str(file.resolve()), stat.st_size, stat.st_mtime_ns).encode())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


SHIPPED_MARK = "shipped.json"        # in a cached step copied from a shipped folder: where from


def was_shipped(folder) -> bool:
    """Whether a `cached_step` folder was copied from a shipped folder rather than built here."""
    return (Path(folder) / SHIPPED_MARK).is_file()


def build_seconds(folder) -> float | None:
    """How long a `cached_step` folder took to build (None for folders cached before builds were timed)."""
    path = Path(folder) / "build.json"
    return load_json(path)["seconds"] if path.is_file() else None
