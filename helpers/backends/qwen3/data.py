"""The paper's utterances through `datasets`: VoxPopuli (offsets), LibriSpeech (trees), FLEURS (evaluation).

    records = load_records(spec, "calibration")     # list[Record]: id, language, text, compressed audio

Roles: `validation` and `train` are disjoint slices of one seeded shuffle of VoxPopuli en (validation first);
`calibration` is LibriSpeech test-clean; `evaluation` is FLEURS (the paper: its train split) in each of
`spec.languages`. A dataset id is a hub id (streamed if `spec.streaming`) or a local folder: in the hub layout
(parquet files and a README listing the configs, read by `load_dataset` like the hub) or written by `save_to_disk`
as `<id>/<config>`. Audio stays compressed (the bytes the dataset stores) until it is encoded.

Each dataset also takes a revision and a data folder (`*_revision`, `*_data_dir`). A dataset whose main branch is
a loading script (`datasets` >= 4 refuses those) is read from the hub's parquet conversion: revision
`refs/convert/parquet`, data folder `{config}` (that branch has one folder per config, `<config>/<split>/*.parquet`,
and no README; `{config}` is replaced by the config name). With a data folder, the config name is not passed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from helpers.backends.languages import language

TEXT_COLUMNS = ("raw_text", "raw_transcription", "normalized_text", "transcription", "text", "sentence")
ID_COLUMNS = ("audio_id", "id")
SHUFFLE_BUFFER = 1000
PARQUET_REVISION = "refs/convert/parquet"
SCRIPT_REFUSED = "Dataset scripts are no longer supported"      # datasets >= 4 on a dataset with a loading script


@dataclass(frozen=True)
class DataSpec:
    """Where each role's utterances come from and how many: the backend's data settings, as plain values."""

    languages: tuple[str, ...]
    train_samples: int
    validation_samples: int
    calibration_samples: int
    eval_samples_per_language: int
    voxpopuli_id: str
    voxpopuli_config: str
    voxpopuli_split: str
    voxpopuli_revision: str
    voxpopuli_data_dir: str
    librispeech_id: str
    librispeech_config: str
    librispeech_split: str
    librispeech_revision: str
    librispeech_data_dir: str
    fleurs_id: str
    fleurs_split: str
    fleurs_revision: str
    fleurs_data_dir: str
    max_utterance_seconds: float
    streaming: bool
    seed: int


@dataclass
class Record:
    """One utterance as the dataset stores it: the audio file's bytes (or its local path)."""

    id: str
    lang: str
    text: str
    audio: bytes | str
    seconds: float

    def load(self) -> tuple[np.ndarray, int]:
        """Mono float32 audio [n] and its sampling rate."""
        audio, rate = sf.read(io.BytesIO(self.audio) if isinstance(self.audio, bytes) else self.audio,
                              dtype="float32", always_2d=True)
        return audio.mean(axis=1), int(rate)


@dataclass(frozen=True)
class Source:
    """One dataset config and split as `load_dataset` reads it; `param` names its parameters (fleurs -> fleurs_*)."""

    param: str
    dataset_id: str
    config: str
    split: str
    revision: str = ""
    data_dir: str = ""

    def __str__(self) -> str:
        at = f"@{self.revision}" if self.revision else ""
        folder = f" [{self.data_dir.format(config=self.config)}]" if self.data_dir else ""
        return f"{self.dataset_id}{at} {self.config}/{self.split}{folder}"


def open_split(src: Source, streaming: bool, seed: int):
    """The split, shuffled with `seed`, with audio left undecoded ({"bytes", "path"} per row)."""
    from datasets import IterableDataset

    ds = open_rows(src, streaming)
    if isinstance(ds, IterableDataset):
        return ds.shuffle(seed=seed, buffer_size=SHUFFLE_BUFFER)
    return ds.shuffle(seed=seed)


def open_rows(src: Source, streaming: bool):
    """The split in its stored order, with audio left undecoded: what `open_split` shuffles (the pre-flight reads
    its first row, `helpers.experiment.preflight.sources`)."""
    from datasets import Audio, load_from_disk

    saved = Path(src.dataset_id) / src.config
    if not src.data_dir and (saved / "dataset_dict.json").is_file():
        ds = load_from_disk(str(saved))
        if src.split not in ds:
            raise ValueError(f"{saved} has no split {src.split!r}; it has {', '.join(ds)}")
        ds = ds[src.split]
    else:
        ds = _load_dataset(src, streaming)
    if "audio" not in ds.column_names:
        raise ValueError(f"{src} has no 'audio' column; columns: {ds.column_names}")
    return ds.cast_column("audio", Audio(decode=False))


def _load_dataset(src: Source, streaming: bool):
    """load_dataset of a source; a dataset that is a loading script fails naming the parameters to set."""
    import datasets

    where = dict(data_dir=src.data_dir.format(config=src.config)) if src.data_dir else dict(name=src.config)
    try:
        return datasets.load_dataset(src.dataset_id, split=src.split, streaming=streaming,
                                     revision=src.revision or None, **where)
    except RuntimeError as err:
        if SCRIPT_REFUSED not in str(err):
            raise
        p = src.param
        raise ValueError(
            f"{src} is a dataset loading script, which datasets {datasets.__version__} no longer runs ({err}). Read "
            f"the hub's parquet conversion instead: set {p}_revision: {PARQUET_REVISION} and {p}_data_dir: "
            f"'{{config}}' (its layout is <config>/<split>/*.parquet), or give {p}_id a local folder (parquet files "
            f"in the hub layout, or save_to_disk as <{p}_id>/<config>)") from err


def _text(row: dict, where: str) -> str:
    for name in TEXT_COLUMNS:
        if name in row and isinstance(row[name], str) and row[name].strip():
            text = " ".join(row[name].split())
            return text[0] + text[1:].lower() if text.isupper() else text      # LibriSpeech is upper case
    if not any(name in row for name in TEXT_COLUMNS):
        raise ValueError(f"{where}: no text column; expected one of {', '.join(TEXT_COLUMNS)}, got {sorted(row)}")
    return ""


def take(rows, n: int, lang: str, where: str, max_seconds: float, skip: int = 0) -> list[Record]:
    """The first `n` usable rows after `skip` usable ones (non-empty text, audio no longer than max_seconds)."""
    out: list[Record] = []
    usable = 0
    for i, row in enumerate(rows):
        text, audio = _text(row, where), row["audio"]
        data = audio["bytes"] if audio.get("bytes") is not None else audio["path"]
        seconds = sf.info(io.BytesIO(data) if isinstance(data, bytes) else data).duration
        if not text or not 0 < seconds <= max_seconds:
            continue
        usable += 1
        if usable > skip:
            rid = next((str(row[c]) for c in ID_COLUMNS if c in row), str(i))
            out.append(Record(f"{lang}-{rid}", lang, text, data, seconds))
            if len(out) == n:
                return out
    raise ValueError(f"{where}: only {usable} usable utterances (text, at most {max_seconds} s); "
                     f"{skip + n} needed")


def sources(P: DataSpec, role: str) -> list[tuple[str, Source]]:
    """[(language, source)] of a role: one VoxPopuli or LibriSpeech source, or one FLEURS config per language."""
    def of(param: str, config: str) -> Source:
        def get(key):
            return getattr(P, f"{param}_{key}")
        return Source(param, get("id"), config, get("split"), get("revision"), get("data_dir"))

    if role in ("train", "validation"):
        return [("en", of("voxpopuli", P.voxpopuli_config))]
    if role == "calibration":
        return [("en", of("librispeech", P.librispeech_config))]
    if role == "evaluation":
        return [(lang, of("fleurs", language(lang).fleurs)) for lang in P.languages]
    raise ValueError(f"unknown role {role!r}; allowed: train, validation, calibration, evaluation")


def load_records(P: DataSpec, role: str) -> list[Record]:
    """The utterances of a role (see the module docstring), deterministic in P.seed."""
    skip, n = {"validation": (0, P.validation_samples), "train": (P.validation_samples, P.train_samples),
               "calibration": (0, P.calibration_samples)}.get(role, (0, P.eval_samples_per_language))
    return [r for lang, src in sources(P, role)
            for r in take(open_split(src, P.streaming, P.seed), n, lang, str(src), P.max_utterance_seconds, skip)]


def dataset_name(P: DataSpec, role: str) -> str:
    """Where a role's utterances come from: 'id config/split' (FLEURS configs joined by '+')."""
    srcs = [src for _, src in sources(P, role)]
    return f"{srcs[0].dataset_id} {'+'.join(s.config for s in srcs)}/{srcs[0].split}"
