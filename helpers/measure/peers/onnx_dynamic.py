"""ONNX Runtime as its users quantize a decoder: `quantize_dynamic`'s int8 over the same exported calls.

The calls are the project's own (`FusedStep` exported by `helpers.method.runtime_graph.export_call`, its products as
plain MatMuls), quantized by `onnxruntime.quantization.quantize_dynamic` with its defaults (int8 weights, one uint8
activation scale per call: a row's result depends on the call's other rows, so it is a peer's AR call, not a lossless
verify call), run with buffers bound once (`helpers.method.runtime_step`). A full cache of 16 positions.

    time_dynamic(core, trees, threads) -> {"ar_step_ms", "q_call_ms": {q: ms}, "engine", "dtype", "threads"}
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from helpers.measure.timing import interleaved
from helpers.method.runtime_graph import export_call, is_product
from helpers.method.runtime_step import BoundCall, output_buffers, session_options
from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree


def plain_products(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every Gemm by a constant weight (how torch.mm exports) as a MatMul, the op `quantize_dynamic` quantizes."""
    inits = {i.name: i for i in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if is_product(node) and node.input[1] in inits:
            if any(a.name == "transB" and a.i for a in node.attribute):
                w = numpy_helper.to_array(inits[node.input[1]])
                inits[node.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w.T), node.input[1]))
            node = helper.make_node("MatMul", list(node.input[:2]), list(node.output), name=node.name)
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


@contextmanager
def quiet_quantizer():
    """`quantize_dynamic` logs a suggestion to pre-process the model on the root logger: dropped while it runs."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def dynamic_session(core: FusedCore, tree: SparseTree | None):
    """The `quantize_dynamic` session of the call over `tree` (None: the AR call) and its bound buffers."""
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic

    step = FusedStep(core, tree)
    inputs = step.example_inputs(core.num_codes - 1)               # root c14: every cache slot visible
    model = plain_products(export_call(step, inputs, ["tokens", "k_cache", "v_cache", "t"], list(step.outputs)))
    with tempfile.TemporaryDirectory() as tmp, quiet_quantizer():
        quantize_dynamic(model, Path(tmp) / "int8.onnx",        # ONNX's shape inference does not know the runtime's
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})     # RMSNorm: float32 it is
        session = ort.InferenceSession(str(Path(tmp) / "int8.onnx"), session_options(torch.get_num_threads()),
                                       providers=["CPUExecutionProvider"])
    return BoundCall(session, output_buffers(step, inputs)), inputs


@torch.no_grad()
def time_dynamic(core: FusedCore, trees: dict[int, SparseTree], rounds: int = 100, warmup: int = 10,
                 seed: int = 0) -> dict:
    """p50 ms of the AR call (q = 1) and of each tree's call (q = N + 1), interleaved, at torch's thread count."""
    calls = {}
    for n, tree in [(0, None), *trees.items()]:
        bound, inputs = dynamic_session(core, tree)
        calls[n] = lambda bound=bound, inputs=inputs: bound(*inputs)
    times = {n: [] for n in calls}
    for _, _, seconds in interleaved(rounds, lambda _: calls, warmup, seed):
        for n, s in seconds.items():
            times[n].append(s)
    ms = {n: float(np.median(t)) * 1e3 for n, t in times.items()}
    return {"engine": "ONNX Runtime", "dtype": "int8 (quantize_dynamic)", "threads": torch.get_num_threads(),
            "ar_step_ms": ms[0], "q_call_ms": {tree.size + 1: ms[n] for n, tree in trees.items()}}
