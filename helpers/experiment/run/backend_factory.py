"""The run's backend and sampler from its parameters, and its code predictor in another dtype or device.

Backends never see `RunParams`: they are built here from plain values, once per process for the same data,
device and sampling parameters (one model in memory at a time).
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields

import torch

from helpers.artifacts import params_key
from helpers.backends.base import Backend
from helpers.experiment.run.params import RunParams
from helpers.experiment.stages.stage_cache import memo, stage_params
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig


def load_backend(P: RunParams) -> Backend:
    """The backend the run parameters name, built from plain values."""
    sampling = dict(top_k=P.top_k, top_p=P.top_p, temperature=P.temperature)
    if P.backend == "mini":
        from helpers.backends.mini.backend import MiniBackend
        return MiniBackend.load(P.cache_dir, P.mini_preset, P.languages, P.device, P.dtype, P.inner_loop_dtype,
                                seed=P.mini_build_seed, trained=P.mini_trained,
                                train=P.train_samples, validation=P.validation_samples,
                                calibration=P.calibration_samples, evaluation=P.eval_samples_per_language, **sampling)
    from helpers.backends.qwen3.backend import Qwen3Backend
    return Qwen3Backend.load(P.model_id_or_path, P.device, P.dtype, P.attn_implementation, data=qwen3_data(P),
                             inner_loop_dtype=P.inner_loop_dtype,
                             speaker=P.speaker, whisper_id=P.whisper_id, asr_batch_size=P.asr_batch_size, **sampling)


def qwen3_data(P: RunParams):
    """The qwen3 backend's data settings (`DataSpec`: datasets, splits, sizes, seed) from the run parameters."""
    from helpers.backends.qwen3.data import DataSpec
    return DataSpec(**{f.name: tuple(getattr(P, f.name)) if f.name == "languages" else getattr(P, f.name)
                       for f in dataclass_fields(DataSpec)})


def backend(P: RunParams) -> Backend:
    """The run's backend, loaded once per process for the same data, device and sampling parameters."""
    loaded = memo("backend")
    key = params_key([stage_params(P, "data"), P.device, P.inner_loop_dtype, P.top_k, P.top_p, P.temperature])
    if key not in loaded:
        loaded.clear()                             # one model in memory at a time
        loaded[key] = load_backend(P)
    return loaded[key]


def sampler(P: RunParams) -> SamplerConfig:
    return SamplerConfig(P.top_k, P.top_p, P.temperature)


def predictor_in(P: RunParams, dtype: torch.dtype, device: torch.device | str | None = None) -> CodePredictor:
    """The code predictor in `dtype` on `device` (default: the model's): the run's own where it already is so, else
    a copy (the talker is never changed). The one rule for the inner loop in another dtype or device."""
    b = backend(P)
    if b.predictor.dtype == dtype and (device is None or b.predictor.device.type == torch.device(device).type):
        return b.predictor
    return CodePredictor.from_talker(b.model.talker, dtype=dtype, device=device)


def deployment_dtype(P: RunParams) -> torch.dtype:
    """The dtype a device runs the inner loop in (timing): the run's, float32 where the run is float64 (float64 is
    for exact comparisons; no deployment runs it)."""
    return torch.float32 if P.dtype == "float64" else getattr(torch, P.dtype)
