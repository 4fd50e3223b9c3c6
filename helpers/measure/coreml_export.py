"""Core ML export of the AR call (q = 1) and the fused draft+verify call (q = N + 1).

Both are the verify call the PyTorch decoders run (`helpers.method.stack.FusedStep`; the fused call with drafts from
every node, `helpers.method.export_step.DraftingStep`), traced with `torch.jit.trace`, converted by `coremltools` to
an `mlprogram` with fp16 compute precision, then compressed to W8A16 (8-bit linear-symmetric weights, fp16 activations) with
`coremltools.optimize.coreml.linear_quantize_weights`. Packages are written to a temporary folder
and renamed into place, so a package on disk is always complete.

Inputs of each package: tokens [1, q] int32, k_cache / v_cache [L, 1, kv, 16, d] fp32, t [1] int32
(the root's code position, 1..14). Outputs: logits [1, q, V], k_new / v_new [L, 1, kv, q, d] and, for
the fused call, drafts [1, q, D, m] (next round's candidate ids from every node).

Prediction needs macOS: on Linux `export_calls` converts and reports sizes; on macOS it also runs
each package on random inputs and compares with PyTorch (`check=True`).

Tracing and conversion drop their known notes on what they do by design (`EXPORT_NOTES`) and coremltools' text
progress bars (`text_bars_dropped`); any other warning shows.
"""

from __future__ import annotations

import io
import logging
import platform
import re
import sys
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from helpers.artifacts import atomic_folder
from helpers.method.predictor import CodePredictor
from helpers.method.drafters import Drafter
from helpers.method.export_step import DraftingStep
from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree


# What tracing and conversion log on every export, by design, {logger: messages}; dropped while `export_calls` runs:
# - torch.jit.trace reads every attribute of each submodule (looking for exported methods), HF's `loss_function`
#   property among them, which warns that the config names no loss: the trace never computes a loss;
# - the calls return (logits, k_new, v_new[, drafts]), a tuple, which coremltools flattens into the named outputs;
# - coremltools lowers torch.roll with index ranges built as int64 and stored as int32 (mlprogram has no int64
#   tensors): the values are positions within one dimension, far below 2**31.
EXPORT_NOTES = {"transformers.modeling_utils": ("was set in the config but it is unrecognized",),
                "coremltools": ("Tuple detected at graph output", "Saving value type of int64 into a builtin type of int32")}


@dataclass
class ExportedPackage:
    name: str                      # "ar" or "fused_n<N>", with "_fp16" / "_w8a16"
    path: str
    size_mb: float
    q: int
    outputs: tuple[str, ...]
    max_abs_err: dict[str, float] | None = None     # vs PyTorch (macOS only)


@dataclass
class ExportReport:
    packages: list[ExportedPackage] = field(default_factory=list)
    predicted: bool = False
    note: str = ""


@contextmanager
def dropped_records(known: dict[str, tuple[str, ...]]):
    """Inside the block, the records of each logger named in `known` ({logger name: messages}) whose message contains
    one of its messages are dropped; its other records, and other loggers', pass. (A logger's filter sees the records
    logged on that very logger, not its children's: name the logger that logs.)"""
    filters = {}
    for name, messages in known.items():
        def keep(record, messages=messages):
            return not any(m in record.getMessage() for m in messages)
        filters[name] = keep
        logging.getLogger(name).addFilter(keep)
    try:
        yield
    finally:
        for name, keep in filters.items():
            logging.getLogger(name).removeFilter(keep)


# A line of tqdm's text bar: its elapsed time, "[00:01<00:02", "[00:00, ? passes/s]", "[00:03]".
BAR_LINE = re.compile(r"\[\d+:\d+(?:<|,|\])")


@contextmanager
def text_bars_dropped():
    """Inside the block, the text progress bars written to `sys.stderr` are dropped (coremltools draws one per
    conversion pass with tqdm's text bar: in a JupyterLab kernel they would show as stderr; under the runner they go
    to the notebook's log, `helpers.experiment.run.quiet.route_progress`, and none reaches stderr); any other stderr
    text is written on when the block ends."""
    caught = io.StringIO()
    try:
        with redirect_stderr(caught):
            yield
    finally:
        rest = [line for line in re.split(r"[\r\n]+", caught.getvalue()) if line.strip() and not BAR_LINE.search(line)]
        if rest:
            sys.stderr.write("".join(line + "\n" for line in rest))


def package_size_mb(path: str | Path) -> float:
    path = Path(path)
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 2 ** 20


def convert_step(step: FusedStep, compute_precision: str = "fp16"):
    """Trace one fused call and convert it to an mlprogram. -> (mlmodel, example inputs)."""
    import coremltools as ct

    if step.core.predictor.dtype != torch.float32:
        raise ValueError(f"export a float32 model (this one is {step.core.predictor.dtype}); "
                         f"Core ML computes in fp16 itself")
    inputs = step.example_inputs()
    step.eval()
    with torch.no_grad():
        traced = torch.jit.trace(step, inputs, check_trace=False)
    tokens, k, v, _ = inputs
    ct_inputs = [ct.TensorType(name="tokens", shape=tuple(tokens.shape), dtype=np.int32),
                 ct.TensorType(name="k_cache", shape=tuple(k.shape), dtype=np.float32),
                 ct.TensorType(name="v_cache", shape=tuple(v.shape), dtype=np.float32),
                 ct.TensorType(name="t", shape=(1,), dtype=np.int32)]
    precision = ct.precision.FLOAT16 if compute_precision == "fp16" else ct.precision.FLOAT32
    mlmodel = ct.convert(traced, inputs=ct_inputs, outputs=[ct.TensorType(name=n) for n in step.outputs],
                         convert_to="mlprogram", compute_precision=precision,
                         minimum_deployment_target=ct.target.iOS17)
    return mlmodel, inputs


def quantize_w8(mlmodel):
    """W8A16: 8-bit linear-symmetric per-channel weights, activations stay fp16."""
    import coremltools.optimize.coreml as cto
    config = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(mode="linear_symmetric",
                                                                               dtype="int8"))
    return cto.linear_quantize_weights(mlmodel, config=config)


def _compare(mlmodel, step: FusedStep, inputs) -> dict[str, float]:
    tokens, k, v, t = inputs
    with torch.no_grad():
        ref = step(*inputs)
    out = mlmodel.predict({"tokens": tokens.numpy().astype(np.int32), "k_cache": k.numpy(),
                           "v_cache": v.numpy(), "t": t.numpy().astype(np.int32)})
    errs = {}
    for name, r in zip(step.outputs, ref):
        if name == "drafts":
            errs[name] = float((np.asarray(out[name])[..., 0] != r[..., 0].numpy()).mean())  # top-1 mismatch rate
        else:
            errs[name] = float(np.abs(np.asarray(out[name], dtype=np.float64) - r.double().numpy()).max())
    return errs


def export_calls(predictor: CodePredictor, drafter: Drafter, tree: SparseTree, out_dir: str | Path,
                 w8a16: bool = True, check: bool | None = None) -> ExportReport:
    """Convert the AR call and the fused call for `tree` to .mlpackage (fp16, and W8A16 if asked).

    check: compare predictions with PyTorch (default: on macOS only; prediction needs macOS)."""
    out_dir = Path(out_dir)
    on_mac = platform.system() == "Darwin"
    check = on_mac if check is None else check
    if check and not on_mac:
        raise ValueError("Core ML prediction needs macOS; on this system only conversion runs (check=False)")
    core = FusedCore(predictor, max_depth=tree.max_depth)
    report = ExportReport(predicted=check, note="" if on_mac else
                          "converted on Linux: Core ML prediction (and the numeric check) needs macOS")
    for label, step in (("ar", FusedStep(core, None)), (f"fused_n{tree.size}", DraftingStep(core, tree, drafter))):
        with dropped_records(EXPORT_NOTES), text_bars_dropped():       # coremltools' pass bars, in JupyterLab
            mlmodel, inputs = convert_step(step)
            variants = [("fp16", mlmodel)] + ([("w8a16", quantize_w8(mlmodel))] if w8a16 else [])
        for kind, model in variants:
            path = out_dir / f"{label}_{kind}.mlpackage"
            atomic_folder(path, lambda tmp, model=model: model.save(str(tmp)))
            errs = _compare(model, step, inputs) if check else None
            report.packages.append(ExportedPackage(f"{label}_{kind}", str(path), package_size_mb(path), step.q,
                                                   step.outputs, errs))
    return report
