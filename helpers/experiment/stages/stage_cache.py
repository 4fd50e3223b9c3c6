"""What a stage's artifacts depend on, and the per-process memory of what was already loaded.

Every stage writes its artifacts to `outputs/<run>/artifacts/<name>-<key>/` (`helpers.artifacts.cached_step`),
where the key hashes the parameters the stage and the stages before it depend on (`stage_params`). Within one
process a loaded stage, the backend and the ideal drafter's predictor are kept in memory (`memo`);
`clear_caches()` forgets all of it (the next call reads the artifacts back from disk).
"""

from __future__ import annotations

from typing import Callable

from helpers.artifacts import cached_step, params_key
from helpers.experiment.run.params import RunParams

STAGE_FIELDS = {
    "data": ("backend", "mini_preset", "mini_build_seed", "model_id_or_path", "dtype", "attn_implementation", "seed", "languages",
             "train_samples", "validation_samples", "calibration_samples", "eval_samples_per_language"),
    "drafters": ("inner_loop_dtype", "depth", "drafters", "drafter_epochs", "drafter_lr", "drafter_batch_size", "drafter_patience",
                 "drafter_lr_sweep", "acceptance_width", "drafter_targets",
                 "top_k", "top_p", "temperature"),       # the sampler: self-distilled targets and every later stage
    "calibration": ("tree_sizes", "ceiling_frames"),
    "evaluation": ("tree_size",),
    "wer": ("wer_seeds",),               # the quality stage (`helpers.experiment.stages.quality`); its artifacts' name
}
QWEN3_DATA_FIELDS = ("speaker", "max_utterance_seconds", "whisper_id") + tuple(
    f"{d}_{k}" for d in ("voxpopuli", "librispeech", "fleurs") for k in ("id", "config", "split", "revision", "data_dir")
    if (d, k) != ("fleurs", "config"))

_MEMO: dict[str, dict] = {"stages": {}, "backend": {}, "ideal": {}}


def stage_params(P: RunParams, stage: str) -> dict:
    """The parameters a stage depends on: its own fields and those of every stage before it."""
    names = list(STAGE_FIELDS)
    keys = [k for s in names[:names.index(stage) + 1] for k in STAGE_FIELDS[s]]
    if P.backend == "qwen3":
        keys += QWEN3_DATA_FIELDS                   # where the real backend's data and ASR come from
    return {k: getattr(P, k) for k in keys}


def memo(kind: str) -> dict:
    """The process's memory of one kind ("stages", "backend", "ideal"), emptied by `clear_caches`."""
    return _MEMO[kind]


def clear_caches(*kinds: str) -> None:
    """Forget what the process loaded: the `kinds` named ("stages", "backend", "ideal"), default all of them (the
    artifacts stay on disk; the next call reads them back)."""
    unknown = set(kinds) - set(_MEMO)
    if unknown:
        raise ValueError(f"unknown cache kinds {sorted(unknown)}; allowed: {', '.join(_MEMO)}")
    for kind in kinds or tuple(_MEMO):
        _MEMO[kind].clear()


def cached(P: RunParams, stage: str, build: Callable, load: Callable, name: str | None = None,
           extra: dict | None = None):
    """load(folder) of the stage's artifacts, built first if absent; loaded once per process. extra: parameters of
    a later stage that this step also depends on (a data step that only some settings make depend on them)."""
    params = {**stage_params(P, stage), **(extra or {})}
    key = (str(P.run_dir), name or stage, params_key(params))
    loaded = memo("stages")
    if key not in loaded:
        loaded[key] = load(cached_step(P.run_dir / "artifacts", name or stage, params, build))
    return loaded[key]
