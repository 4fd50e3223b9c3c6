"""The verify call as an ONNX graph, exported once, and its int8 form with rows independent of their call.

`export_call(module, inputs, names)` traces a static-shape call (`FusedStep`, the prefill) with
`torch.onnx.export`'s TorchScript tracer, as the Core ML export traces it, into an `onnx.ModelProto` in float32: the
exactness reference of the runtime, and the source of its int8 form.

`per_row_int8(model)` rewrites every matrix product of the graph by a constant weight (the projections, and the
heads gathered from their stacked table) into an integer product whose rows do not depend on each other:

    W [K, N]   -> int8 per output column (symmetric, max|W_n| / 127), scale w [N]
    x [M, K]   -> p = max|x_m| per row, x_q = round(L x / p) + Z as uint8 (QuantizeLinear of x / p at step 1 / L)
    x W        ~  (MatMulInteger(x_q, W_int8, Z) as float) * (w / L)[None, :] * p[:, None]

L = 127 and Z = 128 (8-bit activations), or L = 63 and Z = 64 where the CPU has no VNNI dot products, whose u8 x s8
products sum pairs in 16 bits and saturate at 8 bits (the same rule as the `w8a8` kernel of
`helpers.method.kernels`). Every step is per row, and the integer product is exact, so a row's result is the same
bit for bit whatever rows share its call (tests/test_runtime.py). `quantize_dynamic`'s product, by contrast, takes
one activation scale for the whole call: a row's result depends on the other rows.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _rms_norm(g, x, shape, weight, eps):
    """aten::rms_norm over the last axis (opset 17 has none) as ONNX Runtime's own RMSNorm,
    SimplifiedLayerNormalization (registered in the ONNX domain by ONNX Runtime, not by ONNX): x / sqrt(mean(x^2) + eps) * weight (ones where torch has none)."""
    from torch.onnx import symbolic_helper

    if symbolic_helper._is_none(weight):
        width = g.op("Slice", g.op("Shape", x), g.op("Constant", value_t=torch.tensor([-1], device="cpu")),
                     g.op("Constant", value_t=torch.tensor([2 ** 62], device="cpu")))     # graph constants: host
        weight = g.op("ConstantOfShape", width, value_t=torch.ones(1, device="cpu"))
    return g.op("SimplifiedLayerNormalization", x, weight, axis_i=-1, epsilon_f=eps,
                stash_type_i=1)


def export_call(module: torch.nn.Module, inputs: tuple, input_names: list[str],
                output_names: list[str]) -> onnx.ModelProto:
    """The float32 graph of one static-shape call (module(*inputs) -> outputs), every weight an initializer; its
    RMSNorms ONNX Runtime's (`_rms_norm`), so the graph is a graph of that runtime."""
    from torch.onnx import register_custom_op_symbolic, symbolic_helper

    register_custom_op_symbolic("aten::rms_norm", symbolic_helper.parse_args("v", "v", "v", "f")(_rms_norm), OPSET)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")        # the tracer's notes on Python values it records as constants
        torch.onnx.export(module, inputs, buffer, input_names=input_names, output_names=output_names,
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
    return constants_as_initializers(onnx.load_from_string(buffer.getvalue()))


def constants_as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """The tracer records the stack's weights (buffers, not parameters) as Constant nodes: make every tensor
    Constant an initializer of the same name, as weights are held."""
    graph = model.graph
    nodes = []
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def activation_grid(vnni: bool) -> tuple[int, int]:
    """(L, Z): activations on round(L x / max|x|), stored as uint8 at zero point Z (module docstring)."""
    return (127, 128) if vnni else (63, 64)


def int8_columns(w: np.ndarray, axis: int = -2) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output column: W [..., K, N] -> (W_int8 [..., K, N], scale [..., 1, N] float32) over
    `axis` (K). A zero column takes scale 1."""
    scale = np.abs(w).max(axis=axis, keepdims=True) / 127
    scale = np.where(scale > 0, scale, 1).astype(np.float32)
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale


_SHAPE_OPS = ("Gather", "Squeeze", "Slice", "Unsqueeze")     # row picks of a stacked table along its first axis


def _weight_chain(name: str, producers: dict, inits: dict) -> list[onnx.NodeProto] | None:
    """The ops that pick a product's constant weight out of an initializer: [] for the initializer itself, else the
    chain of first-axis picks (Gather/Squeeze/Slice/Unsqueeze) from a stacked table [T, K, N]; None when the weight is
    computed."""
    chain = []
    while name not in inits:
        node = producers.get(name)
        if node is None or node.op_type not in _SHAPE_OPS or not _first_axis(node, producers, inits):
            return None
        chain.append(node)
        name = node.input[0]
    return chain[::-1] if inits[name].ndim >= 2 else None


def _attr(node: onnx.NodeProto, name: str, default):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def is_product(node: onnx.NodeProto) -> bool:
    """A plain product of 2-D x [M, K] by B: Gemm without transposed A, scaling or bias (how torch.mm exports)."""
    return (node.op_type == "Gemm" and _attr(node, "transA", 0) == 0 and _attr(node, "alpha", 1.0) == 1.0
            and (len(node.input) < 3 or not node.input[2] or _attr(node, "beta", 1.0) == 0.0))


def _first_axis(node: onnx.NodeProto, producers: dict, inits: dict) -> bool:
    """Whether a pick works along the first axis only (Gather axis 0; Slice, Squeeze, Unsqueeze on axes [0])."""
    if node.op_type == "Gather":
        return all(a.i == 0 for a in node.attribute if a.name == "axis")
    axes_input = {"Slice": 3, "Squeeze": 1, "Unsqueeze": 1}[node.op_type]
    if len(node.input) <= axes_input or not node.input[axes_input]:
        return False
    name = node.input[axes_input]
    if name in inits:
        return inits[name].tolist() == [0]
    axes = producers.get(name)
    return (axes is not None and axes.op_type == "Constant"
            and numpy_helper.to_array(axes.attribute[0].t).tolist() == [0])


def per_row_int8(model: onnx.ModelProto, vnni: bool) -> onnx.ModelProto:
    """`model` with every product by a constant weight (Gemm, module docstring) made an integer product with per-row
    activations; the products of two activations (attention) stay float32."""
    levels, zero = activation_grid(vnni)
    source_model, model = model, onnx.ModelProto()
    model.CopyFrom(source_model)
    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    quantized: dict[str, tuple[str, str]] = {}                 # source initializer -> (int8 name, scale name)
    new_inits, nodes = [], []
    for node in graph.node:
        chain = _weight_chain(node.input[1], producers, inits) if is_product(node) else None
        transposed = _attr(node, "transB", 0) == 1                  # Gemm's B as [N, K]
        if chain is None or (transposed and chain):                 # computed, or a picked table read transposed
            nodes.append(node)
            continue
        source = chain[0].input[0] if chain else node.input[1]
        if source not in quantized:
            w = inits[source].T if transposed else inits[source]
            w8, scale = int8_columns(np.ascontiguousarray(w))
            scale = (scale / levels).astype(np.float32)          # the activations' step 1 / L folded in
            quantized[source] = (f"{source}_int8", f"{source}_scale")
            new_inits += [numpy_helper.from_array(w8, quantized[source][0]),
                          numpy_helper.from_array(scale, quantized[source][1])]
        w_name, s_name = quantized[source]
        picked = {"w": w_name, "s": s_name}
        for i, pick in enumerate(chain):                        # the same picks of the int8 table and of its scales
            attrs = {a.name: helper.get_attribute_value(a) for a in pick.attribute}
            for key in picked:
                name = f"{picked[key]}__{node.name}_{i}"
                nodes.append(helper.make_node(pick.op_type, [picked[key], *pick.input[1:]], [name], **attrs))
                picked[key] = name
        w_out, s_out = picked["w"], picked["s"]
        nodes += _integer_product(node.input[0], w_out, s_out, node.output[0], levels, zero, node.name)
    del graph.node[:]
    graph.node.extend(nodes)
    keep = [i for i in graph.initializer if i.name not in quantized]
    del graph.initializer[:]
    graph.initializer.extend(keep + new_inits)
    _drop_dead(graph)
    del graph.value_info[:]
    return model


def _integer_product(x: str, w8: str, w_scale: str, out: str, levels: int, zero: int,
                     tag: str) -> list[onnx.NodeProto]:
    """x [M, K] float times the int8 weight w8 [K, N] with column scales w_scale [1, N] (already divided by L) ->
    out [M, N] float: round(L x / p) + Z with p = max|x| per row, an integer product, then the columns' and the
    row's scales. A row of zeros gives zeros (its integers, whatever they are, are scaled by p = 0)."""
    p = f"{tag}_q"
    consts = {f"{p}_step": np.array(1 / levels, np.float32), f"{p}_zero": np.array(zero, np.uint8)}
    nodes = [helper.make_node("Constant", [], [k], value=numpy_helper.from_array(v, k)) for k, v in consts.items()]
    return nodes + [
        helper.make_node("Abs", [x], [f"{p}_abs"]),
        helper.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_peak"], axes=[1], keepdims=1),          # p [M, 1]
        helper.make_node("Div", [x, f"{p}_peak"], [f"{p}_unit"]),                                # in [-1, 1]
        helper.make_node("QuantizeLinear", [f"{p}_unit", f"{p}_step", f"{p}_zero"], [f"{p}_x8"]),  # uint8 [M, K]
        helper.make_node("MatMulInteger", [f"{p}_x8", w8, f"{p}_zero"], [f"{p}_acc"]),           # int32 [M, N]
        helper.make_node("Cast", [f"{p}_acc"], [f"{p}_accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{p}_accf", w_scale], [f"{p}_cols"]),                         # columns' scales / L
        helper.make_node("Mul", [f"{p}_cols", f"{p}_peak"], [out]),                             # then the row's
    ]


def _drop_dead(graph: onnx.GraphProto) -> None:
    """Remove nodes and initializers no graph output depends on (the float weights the int8 copies replaced)."""
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(_topological(keep, graph))
    inits = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def _topological(nodes: list[onnx.NodeProto], graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes ordered so that each runs after the producers of its inputs."""
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    out, waiting = [], list(nodes)
    while waiting:
        left = []
        for node in waiting:
            if all(i in ready for i in node.input):
                out.append(node)
                ready.update(node.output)
            else:
                left.append(node)
        if len(left) == len(waiting):
            raise ValueError(f"graph has a cycle or a missing input at {left[0].op_type} {left[0].name}")
        waiting = left
    return out
