"""The paper's utterances through `datasets`: VoxPopuli (offsets), LibriSpeech (trees), FLEURS (evaluation).

    records = load_records(spec, "calibration")     # list[Record]: id, language, text, compressed audio

Roles: `validation` and `train` are disjoint slices of one seeded shuffle of VoxPopuli en (validation first);
`calibration` is LibriSpeech test-clean; `evaluation` is FLEURS test in each of `spec.languages`. A dataset id is
a hub id (streamed if `spec.streaming`) or a local folder: in the hub layout (parquet files and a README listing
the configs, read by `load_dataset` like the hub) or written by `save_to_disk` as `<id>/<config>`. Audio stays
compressed (the bytes the dataset stores) until it is encoded.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

FLEURS_CONFIGS = {"en": "en_us", "de": "de_de", "es": "es_419", "ru": "ru_ru", "ja": "ja_jp", "zh": "cmn_hans_cn"}
TEXT_COLUMNS = ("raw_text", "raw_transcription", "normalized_text", "transcription", "text", "sentence")
ID_COLUMNS = ("audio_id", "id")
SHUFFLE_BUFFER = 1000


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
    librispeech_id: str
    librispeech_config: str
    librispeech_split: str
    fleurs_id: str
    fleurs_split: str
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


def open_split(dataset_id: str, config: str, split: str, streaming: bool, seed: int):
    """The split, shuffled with `seed`, with audio left undecoded ({"bytes", "path"} per row)."""
    from datasets import Audio, IterableDataset, load_dataset, load_from_disk

    saved = Path(dataset_id) / config
    if (saved / "dataset_dict.json").is_file():
        ds = load_from_disk(str(saved))
        if split not in ds:
            raise ValueError(f"{saved} has no split {split!r}; it has {', '.join(ds)}")
        ds = ds[split]
    else:
        ds = load_dataset(dataset_id, config, split=split, streaming=streaming)
    if "audio" not in ds.column_names:
        raise ValueError(f"{dataset_id} ({config}/{split}) has no 'audio' column; columns: {ds.column_names}")
    ds = ds.cast_column("audio", Audio(decode=False))
    if isinstance(ds, IterableDataset):
        return ds.shuffle(seed=seed, buffer_size=SHUFFLE_BUFFER)
    return ds.shuffle(seed=seed)


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


def load_records(P: DataSpec, role: str) -> list[Record]:
    """The utterances of a role (see the module docstring), deterministic in P.seed."""
    if role in ("train", "validation"):
        rows = open_split(P.voxpopuli_id, P.voxpopuli_config, P.voxpopuli_split, P.streaming, P.seed)
        skip, n = (0, P.validation_samples) if role == "validation" else (P.validation_samples, P.train_samples)
        return take(rows, n, "en", dataset_name(P, role), P.max_utterance_seconds, skip)
    if role == "calibration":
        rows = open_split(P.librispeech_id, P.librispeech_config, P.librispeech_split, P.streaming, P.seed)
        return take(rows, P.calibration_samples, "en", dataset_name(P, role), P.max_utterance_seconds)
    if role == "evaluation":
        return [r for lang in P.languages
                for r in take(open_split(P.fleurs_id, FLEURS_CONFIGS[lang], P.fleurs_split, P.streaming, P.seed),
                              P.eval_samples_per_language, lang, f"{P.fleurs_id} {FLEURS_CONFIGS[lang]}",
                              P.max_utterance_seconds)]
    raise ValueError(f"unknown role {role!r}; allowed: train, validation, calibration, evaluation")


def dataset_name(P: DataSpec, role: str) -> str:
    """Where a role's utterances come from: 'id config/split'."""
    names = {"train": (P.voxpopuli_id, P.voxpopuli_config, P.voxpopuli_split),
             "validation": (P.voxpopuli_id, P.voxpopuli_config, P.voxpopuli_split),
             "calibration": (P.librispeech_id, P.librispeech_config, P.librispeech_split),
             "evaluation": (P.fleurs_id, "+".join(FLEURS_CONFIGS[x] for x in P.languages), P.fleurs_split)}
    if role not in names:
        raise ValueError(f"unknown role {role!r}; allowed: {', '.join(names)}")
    dataset_id, config, split = names[role]
    return f"{dataset_id} {config}/{split}"
