"""How the fused calls (`helpers.method.stack`) multiply by their projections and heads: the weights laid out
once for one matrix kernel of the CPU (`helpers.method.stack.make_linear` lays out each weight for its kernel).

A kernel turns a weight W [N, K] (out, in; as `nn.Linear` holds it) into a callable x [..., K] -> [..., N]:

- "dense": x @ W^T in the model's dtype, W^T kept contiguous (`FusedCore`'s own layout; any dtype, any device).
  The exact reference: float64 proves AR == speculative codes with it.
- "prepacked": bfloat16 weights reordered once into oneDNN's blocked layout (`mkldnn._reorder_linear_weight`,
  then `mkldnn._linear_pointwise`). Bit-identical to dense bfloat16; the one-row call costs about a third of it,
  because dense bfloat16 re-lays W on every call. bfloat16 model, CPU.
- "w8a16": int8 weights with one bfloat16 scale per output channel (symmetric, scale = max|W_n| / 127), bfloat16
  activations (`aten._weight_int8pack_mm`): the paper's W8A16. bfloat16 model, CPU.
- "w8a8": int8 weights per output channel and int8 activations with one scale per row (symmetric, max|x_m| / 127),
  through fbgemm's dynamic linear (`quantized.linear_dynamic`, float32 in and out). fbgemm picks one activation
  scale per call from the call's range; each row is rounded onto its own symmetric int8 grid (round(127 x / max|x_m|)
  / 127) and two constant columns (+1 and -128/127, against zero weight columns) pin that range, so the call
  quantises every row to those integers and a row's product never depends on the call's other rows, bit for bit
  (tests/test_kernels.py). The rest of a call (attention, norms in float32) can still round a row by the call's shape
  in the last bit, which int8 rounding now and then turns into another code: whole frames are counted, not assumed
  (the full-size frames: every one equal; the miniature's: 98 of 100, measured on an Intel Xeon). Where the CPU has
  AMX tiles, a call of several rows goes through oneDNN's int8 product instead (`amx_rows`), whose time hardly grows
  with the rows, given the same integers: the same floats as fbgemm's, bit for bit. float32 model, CPU. Where the CPU
  has no VNNI dot products (an AVX2-only CPU), fbgemm sums pairs of u8 x s8 products in 16 bits, which saturate
  with 8-bit activations, so activations are quantised to 7 bits there (`reduce_range`, pinned by +1 and -64/63):
  measured on an AVX2 EPYC, 8 bits put the fused call 0.5 (relative) away from the dense one.

- "ort-float32", "ort-w8a8" (`RUNTIMES`): not a layout of torch's but a runtime: the whole call exported from the
  dense float32 stack and run by ONNX Runtime (`helpers.method.runtime_step`), in float32 (the runtime's exactness
  reference) or with int8 weights per output column and activations per row, rows independent of their call
  (`helpers.method.runtime_graph`). The stack behind them keeps the dense layout (`helpers.method.stack.layout`).
float32 model, CPU.

A kernel the CPU cannot run is refused with the reason (`unsupported`): oneDNN's bfloat16 reorder behind
"prepacked" needs AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

import torch

RUNTIMES = ("ort-float32", "ort-w8a8")
KERNELS = ("dense", "prepacked", "w8a16", "w8a8", *RUNTIMES)
KERNEL_DTYPES = {"dense": None, "prepacked": torch.bfloat16, "w8a16": torch.bfloat16, "w8a8": torch.float32,
                 **{r: torch.float32 for r in RUNTIMES}}

Linear = Callable[[torch.Tensor], torch.Tensor]


def check_kernel(kernel: str, dtype: torch.dtype, device: torch.device) -> None:
    """Fail early where `kernel` cannot run a model of `dtype` on `device`."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r}: must be one of {KERNELS}")
    wanted = KERNEL_DTYPES[kernel]
    if wanted is not None and dtype != wanted:
        raise ValueError(f"kernel {kernel!r} runs a {str(wanted).removeprefix('torch.')} code predictor, "
                         f"this one is {str(dtype).removeprefix('torch.')}")
    if kernel != "dense" and torch.device(device).type != "cpu":
        raise ValueError(f"kernel {kernel!r} is a CPU kernel, the code predictor is on {device}; use 'dense'")
    reason = unsupported(kernel)
    if reason:
        raise ValueError(f"kernel {kernel!r} cannot run here: {reason}; use 'dense' (or another of {KERNELS})")


@functools.cache
def unsupported(kernel: str) -> str | None:
    """Why this machine's CPU and torch build cannot run `kernel` (None where they can): the "prepacked" reorder is
    tried once on a small weight, as oneDNN decides by the instruction set."""
    if kernel in RUNTIMES:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as e:
            return f"it needs onnx and onnxruntime ({e}); `make setup` installs both"
        return None
    if kernel != "prepacked":
        return None
    if not torch.backends.mkldnn.is_available():
        return "it needs oneDNN (torch.backends.mkldnn), which this torch build lacks"
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(16, 16, dtype=torch.bfloat16, device="cpu"), 1)
    except RuntimeError as e:
        return f"oneDNN refuses its bfloat16 reorder on this CPU ({str(e).splitlines()[0]})"
    return None


def fits(kernel: str, *widths: int) -> bool:
    """Whether `kernel` takes inputs of these widths: w8a16's CPU kernel reads K in blocks of 16 (and crashes
    otherwise); the others take any width."""
    return kernel != "w8a16" or all(w % 16 == 0 for w in widths)


def int8_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: W [N, K] -> (W_int8 [N, K], scale [N] float32), W ~ W_int8 * scale. A row
    of zeros takes scale 1 (any scale holds it; a tiny one would make the kernels' scale products denormal, which
    the CPU computes in slow microcode)."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous(), scale


class _Prepacked:
    def __init__(self, weight: torch.Tensor):
        self.in_features = weight.shape[1]
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")


class _W8A16:
    def __init__(self, weight: torch.Tensor):
        self.in_features = weight.shape[1]
        if not fits("w8a16", self.in_features):
            raise ValueError(f"kernel 'w8a16' needs an input width that is a multiple of 16, got {self.in_features}")
        self.weight, scale = int8_per_channel(weight)
        self.scale = scale.to(torch.bfloat16)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, x.shape[-1]), self.weight, self.scale)
        return out.view(*x.shape[:-1], out.shape[-1])


class _W8A8:
    def __init__(self, weight: torch.Tensor):
        self.in_features = weight.shape[1]
        self.reduce_range = not torch.cpu._is_vnni_supported()     # 7-bit activations: see the module's docstring
        half = 64 if self.reduce_range else 128                    # the grid: q = 127 x + 128 (7 bits: 63 x + 64)
        self.levels = half - 1
        self.pins = (1.0, -half / self.levels)                     # the call's range, whatever its rows
        w8, scale = int8_per_channel(weight)
        padded = torch.cat((w8, torch.zeros(w8.shape[0], 2, dtype=torch.int8, device="cpu")), dim=1)   # pins x zeros
        with warnings.catch_warnings():                 # quantised tensors are deprecated; fbgemm's kernel is not gone
            warnings.filterwarnings("ignore", message=".*quantize_per_tensor, torch.quantize_per_channel.*")
            q = torch._make_per_channel_quantized_tensor(padded, scale.double(),
                                                         torch.zeros_like(scale, dtype=torch.long), 0)
            self.packed = torch.ops.quantized.linear_prepack(q, None)
        self.inputs: dict[int, torch.Tensor] = {}                 # rows -> [rows, K + 2], the pins in place
        self.tiles = amx_rows()                                    # several rows: oneDNN's AMX product, see below
        if self.tiles:
            self.tile_packed = torch.ops.onednn.qlinear_prepack(w8, None)
            self.scale, self.zero = scale, torch.zeros_like(scale, dtype=torch.long)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        peak = rows.abs().amax(-1, keepdim=True).clamp_min_(torch.finfo(torch.float32).tiny)   # (vector_norm's inf
        # norm costs 10-15x more on a few rows)
        grid = torch.round(rows / peak * self.levels)          # each row on its own int8 grid, as exact integers
        if self.tiles and rows.shape[0] > 1:
            out = self._tiles(grid)
        else:
            buffer = self.inputs.get(rows.shape[0])
            if buffer is None:
                buffer = torch.empty(rows.shape[0], self.in_features + 2, device="cpu")
                buffer[:, self.in_features:] = torch.tensor(self.pins, device="cpu")
                self.inputs[rows.shape[0]] = buffer
            torch.div(grid, self.levels, out=buffer[:, :self.in_features])   # on the grid: fbgemm's own rounding of
            out = torch.ops.quantized.linear_dynamic(buffer, self.packed, self.reduce_range)   # it cannot move a value
        return out.mul_(peak).view(*x.shape[:-1], out.shape[-1])

    def _tiles(self, grid: torch.Tensor) -> torch.Tensor:
        """Several rows through oneDNN's int8 product on AMX tiles, given the same integers as the pinned fbgemm call
        (q = grid + 128): the same sums and the same dequantisation, so the same floats bit for bit
        (tests/test_kernels.py), at about one call's cost for up to 16 rows."""
        q = grid.add_(128).to(torch.uint8)
        return torch.ops.onednn.qlinear_pointwise(q, 1 / 127, 128, self.tile_packed, self.scale, self.zero, None, 1.0,
                                                  0, torch.float32, "none", [], "")


@functools.cache
def amx_rows() -> bool:
    """Whether `w8a8` multiplies several rows on AMX tiles (oneDNN) rather than fbgemm's VNNI product, whose time grows
    with the rows: where the CPU has AMX and torch's oneDNN int8 linear, and 8-bit activations."""
    return (torch.cpu._is_amx_tile_supported() and torch.cpu._is_vnni_supported()
            and hasattr(torch.ops.onednn, "qlinear_pointwise"))


def in_features(linear: Linear | torch.Tensor) -> int:
    """K of a laid-out linear (a dense W^T [K, N], or a kernel's)."""
    return linear.shape[0] if isinstance(linear, torch.Tensor) else linear.in_features
