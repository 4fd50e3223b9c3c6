"""Notebook outputs that hold only what the notebook says: progress to the runner's log, known banners silenced.

Two things, both done once per process:

* `route_progress(path)`: under the runner (`python -m helpers`, which names the notebook's log in the environment
  variable `PROGRESS_ENV` for its kernel) progress bars (`tqdm.auto`) and build-step notes
  (`helpers.artifacts.note`: "speech: cached (...)") are appended to that log, which the runner shows as its
  progress line; the notebook keeps none of them. `helpers/__init__.py` calls it before any module binds
  `tqdm.auto.tqdm`. Without the variable (JupyterLab) tqdm draws its widget bar and notes are printed.
* `silence_banners()` (called by `setup`, by every worker process and by `make bench`): the libraries' import-time
  banners listed in `BANNERS` (SoX missing, flash-attn missing, tqdm without ipywidgets, Core ML's runtime missing off
  macOS, torch's deprecation of the tracing Core ML export uses, coremltools' untested torch / scikit-learn versions)
  are dropped, nothing else.

The Core ML export drops its own known notes where it converts (`helpers.measure.coreml_export.dropped_records`).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import io
import logging
import os
import sys
import tempfile
import warnings
from contextlib import redirect_stdout

PROGRESS_ENV = "RVQ_PROGRESS_LOG"

# coremltools logs these at import: no Core ML runtime off macOS, a newer torch / scikit-learn than it was tested with.
CORE_ML_BANNERS = ("Failed to load _ML", "has not been tested with coremltools", "Disabling scikit-learn conversion API")
# Text of the known banners (a test fails on any of them in an executed notebook).
BANNERS = ("SoX could not be found", "sox: not found", "flash-attn is not installed", "IProgress not found",
           "`torch.jit.trace", *CORE_ML_BANNERS)
# The modules that print them at import, and what of their output is the banner.
NOISY_IMPORTS = {"sox": BANNERS[:2], "qwen_tts.core.tokenizer_25hz.vq.whisper_encoder": ("flash-attn", "********")}

_done = {"banners": False, "progress": None}


def under_runner() -> bool:
    """Whether the runner executes this kernel's notebook (it names the notebook's log in PROGRESS_ENV): outputs
    then sit beside the executed notebook in the run folder, and no person is there to move a slider."""
    return bool(os.environ.get(PROGRESS_ENV))


def route_progress(path: str) -> None:
    """Progress bars and build-step notes of this process to the file `path` (appended), not to the notebook."""
    if _done["progress"] == path:
        return
    import tqdm.auto
    import tqdm.autonotebook
    from tqdm.std import tqdm as std_tqdm

    from helpers import artifacts

    sink = open(path, "a", buffering=1, encoding="utf-8")

    class LogTqdm(std_tqdm):
        """tqdm's text bar, written to the runner's log (one line per update; the runner shows the latest)."""

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("file", sink)
            kwargs.setdefault("mininterval", 1.0)
            kwargs.setdefault("ncols", 100)
            super().__init__(*args, **kwargs)

    def trange(*args, **kwargs):
        return LogTqdm(range(*args), **kwargs)

    for module in (tqdm, tqdm.auto, tqdm.autonotebook):   # `from tqdm import tqdm` too (coremltools' passes)
        module.tqdm, module.trange = LogTqdm, trange
    artifacts.set_note_sink(sink)
    _done["progress"] = path


def silence_banners() -> None:
    """Drop the known import-time banners (`BANNERS`) of the libraries the backends load; other output stays."""
    if _done["banners"]:
        return
    logging.getLogger("sox").addFilter(lambda record: BANNERS[0] not in record.getMessage())   # a logger warning
    warnings.filterwarnings("ignore", message="IProgress not found")
    warnings.filterwarnings("ignore", message="`torch.jit.trace", category=FutureWarning)     # Core ML export's tracing
    warnings.filterwarnings("ignore", message="Converting a tensor to a Python boolean")      # its shape checks, traced
    logging.getLogger("coremltools").addFilter(
        lambda record: not any(b in record.getMessage() for b in CORE_ML_BANNERS))
    if not any(isinstance(f, _QuietFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietFinder())
    _done["banners"] = True


def without(text: str, known: tuple[str, ...]) -> str:
    """`text` less its lines that contain one of `known` (and the blank lines a banner leaves)."""
    kept = [line for line in text.splitlines() if line.strip() and not any(k in line for k in known)]
    return "".join(line + "\n" for line in kept)


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of NOISY_IMPORTS with the other finders and loads them with their banner filtered out."""

    def find_spec(self, name, path=None, target=None):
        if name not in NOISY_IMPORTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _QuietLoader(spec.loader, NOISY_IMPORTS[name])
                return spec
        return None


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader, known: tuple[str, ...]):
        self.loader, self.known = loader, known

    def __getattr__(self, name):                  # get_source, get_filename, ...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        """Run the module with stdout and file descriptor 2 (a shell's "sox: not found") captured; what is not a
        known banner is written back."""
        out = io.StringIO()
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile(mode="w+b") as err:
            os.dup2(err.fileno(), 2)
            try:
                with redirect_stdout(out):
                    self.loader.exec_module(module)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                err.seek(0)
                rest_err = without(err.read().decode(errors="replace"), self.known)
                rest_out = without(out.getvalue(), self.known)
                if rest_err:
                    sys.stderr.write(rest_err)
                if rest_out:
                    sys.stdout.write(rest_out)
