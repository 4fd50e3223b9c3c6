"""Sound examples as files beside the executed notebook, shown with short players (notebook 05's "Listen").

    src = save_clip(P, waveform, sample_rate, "05_en_0_ar")     # <run folder>/audio/05_en_0_ar.wav
    display(HTML(players("en: the sentence", {"AR": src, ...})))

An embedded player (IPython's `Audio(data)`) puts the whole clip into the notebook as base64, some 120 kB a clip;
here the notebook holds an `<audio>` tag whose `src` is the WAV file's path relative to the folder the notebook is
read from, so a copy of the run folder (outputs/mini-reference/) carries its clips along.
"""

from __future__ import annotations

import html
import os
import wave
from pathlib import Path

import numpy as np

from helpers.artifacts import atomic_write
from helpers.experiment.run.params import REPO_ROOT, RunParams
from helpers.experiment.run.quiet import under_runner

AUDIO = "audio"                 # the run folder's subfolder of sound examples


def write_wav(path: str | Path, waveform, sample_rate: int) -> Path:
    """A mono waveform (floats) as 16-bit PCM WAV at `path`, scaled to its peak as IPython's Audio does (a silent
    clip stays silent); written atomically."""
    x = np.asarray(waveform, dtype=np.float64).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"a clip needs finite samples; got {x.size} samples")
    peak = float(np.abs(x).max())
    pcm = (np.round(x / peak * 32767) if peak > 0 else np.zeros_like(x)).astype("<i2")

    def write(tmp: Path) -> None:
        with wave.open(str(tmp), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(int(sample_rate))
            f.writeframes(pcm.tobytes())

    return atomic_write(path, write)


def notebook_folder(P: RunParams) -> Path:
    """The folder the notebook that shows a player is read from: the run folder where the runner (`python -m
    helpers`, `quiet.under_runner`) writes the executed notebook, else notebooks/
    (JupyterLab, `make lab`)."""
    return P.run_dir if under_runner() else REPO_ROOT / "notebooks"


def save_clip(P: RunParams, waveform, sample_rate: int, name: str) -> str:
    """Write <run folder>/audio/<name>.wav (`write_wav`); -> its path relative to `notebook_folder(P)`, as a player's
    src."""
    path = write_wav(P.run_dir / AUDIO / f"{name}.wav", waveform, sample_rate)
    return Path(os.path.relpath(path.resolve(), notebook_folder(P).resolve())).as_posix()


def players(title: str, clips: dict[str, str]) -> str:
    """HTML: `title` (plain text, bold up to the first ": ") over one row of players, {label: src} (`save_clip`)."""
    if not clips:
        raise ValueError("no clip to show")
    head, sep, rest = title.partition(": ")
    caption = f"<b>{html.escape(head)}</b>{sep}{html.escape(rest)}" if sep else html.escape(title)
    cells = "".join(f'<td>{html.escape(label)}<br><audio controls preload="none" src="{html.escape(src)}"></audio></td>'
                    for label, src in clips.items())
    return f"<p>{caption}</p><table><tr>{cells}</tr></table>"
