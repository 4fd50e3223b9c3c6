"""Every dataset source a run names, read to its first usable record with the run's own loaders.

    check_source(P, "fleurs", "ja", source)   # -> one line: config/split, columns, audio decoded, text normalised

The same `helpers.backends.qwen3.data` functions the run uses (`open_rows`, `take`, `Record.load`), without the
shuffle (whose buffer would read a thousand rows first) and always streamed (a hub split is not downloaded whole).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.backends.qwen3 import data
from helpers.backends.text import TextNormalizer
from helpers.experiment.run.params import RunParams
from helpers.experiment.preflight.check import PreflightError
from helpers.experiment.preflight.hub import ask_hub
from helpers.experiment.preflight.models import is_local

ROLES = ("train", "calibration", "evaluation")      # validation reads train's source


def run_sources(P: RunParams) -> list[tuple[str, data.Source]]:
    """[(language, source)] of every role, each source once."""
    from helpers.experiment.run.backend_factory import qwen3_data

    spec = qwen3_data(P)
    seen, out = set(), []
    for role in ROLES:
        for lang, src in data.sources(spec, role):
            if src not in seen:
                seen.add(src)
                out.append((lang, src))
    return out


def settings(param: str) -> str:
    """The parameters that say where a source is (FLEURS' config follows `languages`)."""
    config = "languages (FLEURS configs per language)" if param == "fleurs" else f"{param}_config"
    return f"{param}_id, {config}, {param}_split, {param}_revision, {param}_data_dir"


def hub_metadata(src: data.Source) -> None:
    """A hub dataset and revision exist (one metadata call: fails at once offline, where datasets retries)."""
    from huggingface_hub.constants import HF_HUB_OFFLINE

    if not is_local(src.dataset_id) and not HF_HUB_OFFLINE:         # offline: datasets reads its own cache
        ask_hub(lambda api: api.dataset_info(src.dataset_id, revision=src.revision or None), f"{src.param}_id",
                src.dataset_id, "dataset")


def check_source(P: RunParams, lang: str, src: data.Source) -> str:
    """One record of a source, read, decoded and normalised; a line saying what was found."""
    if is_local(src.dataset_id) and not Path(src.dataset_id).expanduser().is_dir():
        raise PreflightError(f"{src.param}_id={src.dataset_id!r}: no such folder; give an existing folder (parquet "
                             "files in the hub layout, or save_to_disk as <id>/<config>) or a hub id (owner/name)")
    hub_metadata(src)
    try:
        rows = data.open_rows(src, streaming=True)
        columns = rows.column_names or sorted(next(iter(rows)))
        [record] = data.take(rows, 1, lang, str(src), P.max_utterance_seconds)
        audio, rate = record.load()
    except Exception as err:                     # datasets' and soundfile's own errors name what they found
        raise PreflightError(f"{src}: {type(err).__name__}: {str(err)[:300]}; check {settings(src.param)}") from err
    if audio.size == 0 or not np.isfinite(audio).all() or rate <= 0:
        raise PreflightError(f"{src}: record {record.id}'s audio decodes to {audio.size} samples at {rate} Hz "
                             f"(non-finite values: {not np.isfinite(audio).all()}); check the dataset's audio column")
    normalised = TextNormalizer()(record.text, lang)
    if not normalised:
        raise PreflightError(f"{src}: record {record.id}'s text {record.text!r} normalises to nothing; the error "
                             "rates need words: check the dataset's text column")
    return (f"{src}: record {record.id}, columns {', '.join(columns)}; audio {record.seconds:.1f} s at {rate} Hz "
            f"decodes; text {record.text[:32]!r} normalises to {normalised[:32]!r}")
