"""The data stage: every role's encoded samples, their teacher-forced (g, codes), the drafters' targets and inputs.

The first stage of `helpers.experiment.stages.stages` (which re-exports it), cached the same way: built once per run
by the first process that asks, read from `outputs/<run>/artifacts/data-<key>/` by every later one.
"""

from __future__ import annotations

import torch

from helpers.artifacts import load_json, load_tensors, save_json, save_tensors
from helpers.backends.base import Sample
from helpers.experiment.run.backend_factory import backend, sampler
from helpers.experiment.run.params import RunParams
from helpers.experiment.stages.stage_cache import cached
from helpers.method.training import TeacherForcedHidden, fits_in_memory, materialised, sampled_targets

SAMPLE_FIELDS = ("id", "lang", "text", "speaker", "seconds")
TARGET_SEED = 20_000             # sampled drafter targets of role r: P.seed + TARGET_SEED + TARGET_ROLES.index(r)
TARGET_ROLES = ("train", "validation")


def samples(P: RunParams, role: str) -> list[Sample]:
    """The backend's samples of a role (text, input_ids [1, n + 8], codes [T, 16], ...), saved once per run: the
    datasets are streamed and encoded by the first process that asks, every later one reads the artifact."""
    b = backend(P)

    def build(folder):
        rows = b.samples(role)
        tensors = {f"{i}.{k}": v for i, s in enumerate(rows) for k, v in (("input_ids", s.input_ids), ("codes", s.codes))
                   if v is not None}
        save_tensors(folder / "samples.safetensors", tensors)
        save_json(folder / "samples.json", [{k: getattr(s, k) for k in SAMPLE_FIELDS} for s in rows])

    def load(folder):
        t, device = load_tensors(folder / "samples.safetensors"), b.model.device
        return [Sample(**row, input_ids=t[f"{i}.input_ids"].to(device),
                       codes=t[f"{i}.codes"].to(device) if f"{i}.codes" in t else None)
                for i, row in enumerate(load_json(folder / "samples.json"))]

    return cached(P, "data", build, load, name=f"samples-{role}")


def dataset_table(P: RunParams) -> list[dict]:
    """The paper's Table 1 shape (stage, dataset, language, samples, hours, frames) of the run's saved samples."""
    return backend(P).dataset_table(lambda role: samples(P, role))


def teacher_forced(P: RunParams, role: str) -> tuple[torch.Tensor, TeacherForcedHidden, torch.Tensor]:
    """g [F, H_talker], h [F, 15, H] (computed per batch on indexing: h[idx], h[:]), codes [F, 16] over every
    frame of a role (train or validation)."""
    b = backend(P)

    def build(folder):
        g, codes = b.teacher_forced(samples(P, role))
        save_tensors(folder / "teacher_forced.safetensors", {"g": g, "codes": codes})

    def load(folder):
        t = load_tensors(folder / "teacher_forced.safetensors")
        g, codes = t["g"].to(b.predictor.device, b.predictor.dtype), t["codes"].to(b.predictor.device)
        return g, TeacherForcedHidden(b.predictor, g, codes), codes

    return cached(P, "data", build, load, name=f"data-{role}")


def target_params(P: RunParams) -> dict:
    """The parameters the drafters' targets add to a data step's key: none for the codec's codes; the sampler's
    for the predictor's own draws, which "distributions" shares (the same frames; the labels are the drafters
    stage's)."""
    if P.drafter_targets == "codec":
        return {}
    return {"drafter_targets": "samples", **{k: getattr(P, k) for k in ("top_k", "top_p", "temperature")}}


def drafter_targets(P: RunParams, role: str) -> tuple[torch.Tensor, torch.Tensor]:
    """What the drafters learn on a role (train or validation): g [F, H_talker] and codes [F, 16]. The codec's codes
    (`teacher_forced`), or with drafter_targets "samples" or "distributions" the code predictor's own draws of
    c1..c15 from each frame's teacher-forced (g, c0) with the run's sampler (`training.sampled_targets`,
    self-distillation), saved."""
    if role not in TARGET_ROLES:
        raise ValueError(f"drafters learn on the roles {TARGET_ROLES}, not {role!r}")
    b = backend(P)
    g, _, codes = teacher_forced(P, role)
    if P.drafter_targets == "codec":
        return g, codes

    def build(folder):
        generator = torch.Generator().manual_seed(P.seed + TARGET_SEED + TARGET_ROLES.index(role))
        drawn = sampled_targets(b.predictor, g, codes, sampler(P), generator)
        save_tensors(folder / "targets.safetensors", {"codes": drawn})

    def load(folder):
        return load_tensors(folder / "targets.safetensors")["codes"].to(codes.device)

    return g, cached(P, "data", build, load, name=f"targets-{role}", extra=target_params(P))


def drafter_states(P: RunParams, role: str, prenorm: bool) -> torch.Tensor | TeacherForcedHidden:
    """What the drafters read on a role's teacher-forced frames of their targets (`drafter_targets`): h [F, 15, H],
    or r (the residual stream before the final norm) where `prenorm`. Computed once and saved where it fits in
    `MATERIALISE_BYTES` (every drafter job and learning rate then loads it: the code predictor's pass over the
    miniature's train role took 46 s of each job); larger (the real model's VoxPopuli set) it stays a
    `TeacherForcedHidden`, computed a batch at a time."""
    b = backend(P)
    g, codes = drafter_targets(P, role)
    lazy = TeacherForcedHidden(b.predictor, g, codes, prenorm)
    if not fits_in_memory(lazy):
        return lazy

    def build(folder):
        save_tensors(folder / "states.safetensors", {"states": materialised(lazy)})

    def load(folder):
        return load_tensors(folder / "states.safetensors")["states"].to(b.predictor.device)

    return cached(P, "data", build, load, name=f"states-{role}-{'r' if prenorm else 'h'}", extra=target_params(P))


def drafter_states_job(P: RunParams, job: tuple[str, bool]) -> None:
    role, prenorm = job
    drafter_states(P, role, prenorm)
