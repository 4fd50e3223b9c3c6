"""Device discipline in tests: run code with the model on another device than the CPU, even without a GPU.

The device comes from `RVQ_TEST_DEVICE`:
- "lazy" (default): PyTorch's lazy TorchScript backend on the CPU, under `StrictDevices`. A tensor made without a
  device (torch.zeros(...), torch.arange(...), torch.tensor(...)) or explicitly on the CPU (uniforms from a CPU
  torch.Generator, a mask built on the CPU) that meets a model tensor raises `DeviceMixError`: the error a CUDA
  run would give, caught on a CPU-only machine.
- "cuda": the model on the GPU, nothing wrapped (CUDA itself refuses mixed devices with a RuntimeError).

Why two layers for "lazy":
- the lazy device's lowered ops refuse non-lazy operands ("Input tensor is not a lazy tensor");
- `StrictDevices`, a TorchFunctionMode, closes the backend's holes: ops it runs by CPU fallback (searchsorted,
  where, equal, ...) accept CPU operands silently. Mixing rules follow CUDA: 0-dim CPU tensors mix freely;
  indexing with CPU index tensors, copy_/setitem from the CPU and .to/.cpu transfers are allowed.
Lazy-backend bugs repaired here (torch 2.14): activations on a non-contiguous lazy view and the outputs of
multi-output views (chunk, split, unbind) come back as CPU tensors (rebuilt from narrow/select, or moved back
and counted in `StrictDevices.repaired`); `torch.autocast(device_type="lazy")` raises (no autocast dtype for
"lazy"; Qwen3-TTS's RoPE opens a disabled autocast of the input's device type), so "lazy" maps to a disabled
CPU autocast, a no-op.

    with device_check(model) as dev:              # model on the test device, back on the CPU on exit
        out = fn(inputs.to(dev))
    with backend_device_check(backend) as dev:    # the qwen3 backend: model, tokenizer output, encoded samples
        backend.synthesize(backend.samples("evaluation")[0], "ar")
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

LAZY = "lazy"
DEVICE = os.environ.get("RVQ_TEST_DEVICE", LAZY)
if DEVICE not in (LAZY, "cuda"):
    raise ValueError(f"RVQ_TEST_DEVICE={DEVICE!r}; allowed: lazy (default, CPU-only), cuda")


class DeviceMixError(RuntimeError):
    """One op got tensors of two devices (what CUDA raises as 'Expected all tensors to be on the same device')."""


def mix_errors() -> tuple[type[BaseException], str]:
    """(exception type, message pattern) a device mix raises on the test device (for pytest.raises)."""
    return (DeviceMixError, "mixes devices") if DEVICE == LAZY else (RuntimeError, "device")


@functools.cache
def init_lazy() -> None:
    """Start the lazy TorchScript backend (once per process) and let torch.autocast accept "lazy"."""
    import torch._lazy
    import torch._lazy.ts_backend
    try:
        torch._lazy.ts_backend.init()
    except RuntimeError as err:                 # already initialised in this process
        if "multiple backend fallbacks" not in str(err):
            raise
    stock = torch.autocast
    if not getattr(stock, "_lazy_ok", False):
        class autocast(stock):                  # noqa: N801 -- stands in for torch.autocast
            _lazy_ok = True

            def __init__(self, device_type, *args, **kwargs):
                super().__init__("cpu" if device_type == LAZY else device_type, *args, **kwargs)
        torch.autocast = autocast


T = torch.Tensor
# transfers and ops CUDA allows across devices (copy semantics, CPU index tensors)
ALLOWED = {T.to, T.cpu, T.copy_, T.tolist, T.item, T.numpy, T.new_tensor, T.__repr__, T.__format__,
           T.__reduce_ex__, T.__deepcopy__, torch.as_tensor, torch.tensor, T.__bool__, T.__int__, T.__float__,
           T.__index__, T.__len__, T.__iter__, T.__contains__, torch._has_compatible_shallow_copy_type}
INDEXING = {T.__getitem__, T.__setitem__}      # a lazy tensor indexed by CPU indices / set from CPU: allowed
SYNCS = {T.cpu, T.tolist, T.item, T.numpy, T.__bool__, T.__int__, T.__float__, T.__index__}
TRANSFERS = {T.to, T.cpu, T.tolist, T.item, T.numpy, T.__reduce_ex__, T.__deepcopy__}


def _narrowed(x: torch.Tensor, sizes, dim: int) -> tuple[torch.Tensor, ...]:
    out, start = [], 0
    for n in sizes:
        out.append(x.narrow(dim, start, n))
        start += n
    return tuple(out)


def _chunk(x, chunks, dim=0):
    n = x.shape[dim]
    step = -(-n // chunks) if n else 0
    return _narrowed(x, [min(step, n - s) for s in range(0, n, step)] if step else [0] * chunks, dim)


def _split(x, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, int):
        n, k = x.shape[dim], split_size_or_sections
        return _narrowed(x, [min(k, n - s) for s in range(0, n, k)] if n else [0], dim)
    return _narrowed(x, list(split_size_or_sections), dim)


def _unbind(x, dim=0):
    return tuple(x.select(dim, i) for i in range(x.shape[dim]))


VIEW_SPLITS = {T.chunk: _chunk, torch.chunk: _chunk, T.split: _split, torch.split: _split,
               T.split_with_sizes: _split, torch.split_with_sizes: _split, T.unbind: _unbind, torch.unbind: _unbind}


def _tensors(tree):
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


class StrictDevices(TorchFunctionMode):
    """Raise `DeviceMixError` when one call mixes lazy tensors with non-0-dim tensors of another device;
    repair the lazy backend's lazy-in/CPU-out results."""

    sync_step = True           # mark_step() before each host sync: cuts the lazy graph (4-10x faster runs)
    ops_per_step = 500         # and after this many ops without one (code with no host sync builds one huge graph)
    repaired: dict[str, int] = {}
    _ops = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._ops += 1
        if (self._ops >= self.ops_per_step or func in SYNCS and self.sync_step and args
                and isinstance(args[0], torch.Tensor) and args[0].device.type == LAZY):
            torch._lazy.mark_step()
            self._ops = 0
        if func in ALLOWED:
            return func(*args, **kwargs)
        if func in VIEW_SPLITS and isinstance(args[0], torch.Tensor) and args[0].device.type == LAZY:
            return VIEW_SPLITS[func](*args, **kwargs)
        if func in INDEXING:
            if args[0].device.type == "cpu" and any(t.device.type == LAZY for t in _tensors(args[1])):
                raise DeviceMixError(f"a CPU tensor {tuple(args[0].shape)} indexed by lazy indices")
            return func(*args, **kwargs)
        ins = _tensors((args, kwargs))
        devices = {t.device.type for t in ins if not (t.device.type == "cpu" and t.dim() == 0)}
        if LAZY in devices and len(devices) > 1:
            shapes = ", ".join(f"{t.device.type}:{tuple(t.shape)}:{str(t.dtype)[6:]}" for t in ins)
            raise DeviceMixError(f"{getattr(func, '__qualname__', func)} mixes devices: {shapes}")
        out = func(*args, **kwargs)
        if devices == {LAZY} and func not in TRANSFERS:
            out = tree_map(self._repair(func), out)
        return out

    @staticmethod
    def _repair(func):
        def repair(t):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim():
                name = getattr(func, "__qualname__", str(func))     # a lazy op that came back on CPU: a backend bug
                StrictDevices.repaired[name] = StrictDevices.repaired.get(name, 0) + 1
                return t.to(LAZY)
            return t
        return repair


@contextlib.contextmanager
def device_check(*modules: torch.nn.Module):
    """Move modules to the test device for the block (under `StrictDevices` on "lazy"), back to the CPU on exit.
    Yields the device name."""
    if DEVICE == LAZY:
        init_lazy()
    for m in modules:
        m.to(DEVICE)
    try:
        with StrictDevices() if DEVICE == LAZY else contextlib.nullcontext():
            yield DEVICE
    finally:
        for m in modules:
            m.to("cpu")


@contextlib.contextmanager
def backend_device_check(backend, roles=("train", "validation", "calibration", "evaluation")):
    """The qwen3 backend's model on the test device, and the wrapper's `device` (tokenize puts ids there).

    The speech tokenizer runs under torch.inference_mode, which lazy tensors do not support ("Cannot set
    version_counter for inference tensor"): it stays on the CPU (as `backend.model.to` leaves it), and the roles'
    samples are encoded first and their ids/codes moved to the device, as a CUDA backend holds them. On exit
    the samples, the wrapper's device and the model are back on the CPU. Yields the device name."""
    if DEVICE == LAZY:
        init_lazy()
    for role in roles:
        backend.samples(role)
    tts, saved = backend.tts, backend.tts.device
    cpu_samples = dict(backend._samples)
    tts.device = torch.device(DEVICE)
    backend._samples = {role: [dataclasses.replace(s, input_ids=s.input_ids.to(DEVICE), codes=s.codes.to(DEVICE))
                               for s in samples] for role, samples in cpu_samples.items()}
    try:
        with device_check(backend.model) as dev:
            yield dev
    finally:
        tts.device, backend._samples = saved, cpu_samples
