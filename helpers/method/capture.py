"""What a captured module may do, checked on any machine: `DeviceOps` watches every op torch dispatches.

A CUDA graph replays kernels; it cannot replay the host. Inside a module the decoders capture (`Prefill`, `ARStep`,
`Round`, and the frame loops `ARFrame`, `RoundLoop`, `SpeculativeFrame` of `helpers.method.decoding`) three things
therefore break capture, or silently bake one frame's values into every replay:

    host reads       `.item()`, `int(t)`, `bool(x)`, `if x:` (`aten._local_scalar_dense` and the ops torch tags
                     `data_dependent_output`), and ops whose output shape depends on data (`nonzero`,
                     `masked_select`, ...: tagged `dynamic_output_shape`);
    host data        a tensor made from Python data (`torch.tensor([t])`: `aten.lift_fresh`), which on CUDA is a
                     host-to-device copy;
    host tensors     a copy between devices (`aten._to_copy` / `copy_` whose source and destination devices differ).

`DeviceOps(strict=True)` raises `CaptureError` at the first of them, naming the op; on the CPU it finds what CUDA
capture would refuse, before any GPU is at hand (the modules a graph captures gather their rows on the device:
`helpers.method.stack.FusedStep`).

`DeviceOps()` (not strict) counts instead: `kernels` (ops that compute: views and metadata excluded), `host_reads`,
`from_host`. A captured graph costs about its kernels times a few microseconds, so the counts on the CPU are the
GPU's cost in advance (`make bench` prints them, `helpers.measure.kernel_counts`).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_HOST_DATA = {torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default}
_COPIES = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default, torch.ops.aten.copy.default}
_METADATA = {torch.ops.aten.detach.default, torch.ops.aten._unsafe_view.default}     # views torch does not tag


class CaptureError(RuntimeError):
    """An op that CUDA-graph capture refuses (or would freeze): a host read, host data or a cross-device copy."""


def _devices(args) -> set[torch.device]:
    found = set()
    for a in args:
        if isinstance(a, torch.Tensor):
            found.add(a.device)
        elif isinstance(a, (list, tuple)):
            found |= _devices(a)
    return found


def _integer_indexing(func, args) -> bool:
    """`x[idx]` with integer index tensors: a static shape (torch tags `aten.index` dynamic for boolean masks)."""
    return func is torch.ops.aten.index.Tensor and all(
        i is None or not (i.dtype == torch.bool or i.dtype == torch.uint8) for i in args[1])


def _has_tensor(out) -> bool:
    return isinstance(out, torch.Tensor) or (isinstance(out, (list, tuple)) and any(map(_has_tensor, out)))


def _kind(func, args, kwargs) -> str | None:
    """'host read', 'host data', 'cross-device copy' or None."""
    tags = set(func.tags)
    if func is torch.ops.aten._local_scalar_dense.default or torch.Tag.data_dependent_output in tags:
        return "host read"
    if torch.Tag.dynamic_output_shape in tags and not _integer_indexing(func, args):
        return "host read (a data-dependent shape)"
    if func in _HOST_DATA:
        return "host data (a tensor made from Python data)"
    if func in _COPIES:
        target = kwargs.get("device")
        devices = _devices(args) | ({torch.device(target)} if target is not None else set())
        if len(devices) > 1:
            return f"cross-device copy ({', '.join(sorted(str(d) for d in devices))})"
    return None


class DeviceOps(TorchDispatchMode):
    """Watch the ops a block dispatches. strict: raise `CaptureError` at the first host read, host data or
    cross-device copy; else count them and the kernels (`kernels`, `host_reads`, `from_host`, `ops` {name: n})."""

    def __init__(self, strict: bool = False):
        super().__init__()
        self.strict = strict
        self.kernels = self.host_reads = self.from_host = 0
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _kind(func, args, kwargs)
        if kind is not None and self.strict:
            raise CaptureError(f"{kind}: {func} inside a captured module; a CUDA graph cannot replay it (make the "
                               f"value a device tensor: a buffer, an index_select, a torch.where)")
        if kind is not None and kind.startswith("host read"):
            self.host_reads += 1
        elif kind is not None:
            self.from_host += 1
        out = func(*args, **kwargs)
        if kind is None and not func.is_view and func not in _METADATA and _has_tensor(out):
            self.kernels += 1
            name = func.overloadpacket.__name__
            self.ops[name] = self.ops.get(name, 0) + 1
        return out

