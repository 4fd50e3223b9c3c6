"""The verify call and the prefill run by ONNX Runtime's CPU provider: a deployment of the one decoder.

A predictor whose kernel is a runtime (`helpers.method.kernels.RUNTIMES`: "ort-float32", "ort-w8a8") keeps the dense
float32 stack (`FusedCore`) as the source of its calls: each call is exported once from it
(`helpers.method.runtime_graph.export_call`, the static-shape `FusedStep` that the Core ML export also traces), made
int8 with per-row activations for "ort-w8a8" (`per_row_int8`), and run by one ONNX Runtime session. Everything else
of a frame (the sampler, the walk, the commit, the drafts from the stop node) stays the method's own code, on the
same torch tensors:

    RuntimeStep(core, tree, prenorm)   forward(tokens [1, q], k, v [L, 1, kv, S, d], t [1]) -> FusedStep's outputs
    RuntimePrefill(core, prenorm)      forward(g [1, Ht], c0 [1], k, v) -> `FusedCore.prefill`'s outputs

Buffers are bound once (ONNX Runtime's I/O binding, by pointer): the call's inputs are copied into the step's own
input tensors, the caches are read where the decoder keeps them (bound again only if it hands over other tensors),
and the outputs are written into the step's own output tensors, which the returned tensors are (the next call
overwrites them). One Python call per model call, no allocation per call on the host side. Batch 1.
Sessions are kept per official model, call, weights, runtime and threads: a decoder and a timing of the same call
share one.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch
from torch import nn

from helpers.method.stack import FusedCore, FusedStep
from helpers.method.tree import SparseTree

_SESSIONS: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()   # official model -> calls


def session_options(threads: int):
    """How every session here runs: `threads` intra-op threads, one call at a time, every graph optimization, errors
    only in the log, and no thread left spinning after a call (the host's own work follows it)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def runtime_session(core: FusedCore, key: tuple, module: nn.Module, inputs: tuple, input_names: list[str],
                    output_names: list[str], runtime: str):
    """The ONNX Runtime session of one call of `core` (exported and built on first use, then shared by every core
    over the same weights): `module` traced on `inputs`, int8 for "ort-w8a8", with as many threads as torch has
    now. -> (session, the op type of every node of the graph it runs)."""
    import onnxruntime as ort

    from helpers.method.runtime_graph import export_call, per_row_int8

    threads = torch.get_num_threads()
    cache = _SESSIONS.setdefault(core.predictor.official, {})
    call = (*key, hash(core._signature), runtime, threads)        # which weights, laid out how; which session
    if call not in cache:                                        # the export is not kept: it holds every weight
        model = export_call(module, inputs, input_names, output_names)
        if runtime == "ort-w8a8":
            model = per_row_int8(model, vnni=torch.cpu._is_vnni_supported())
        session = ort.InferenceSession(model.SerializeToString(), session_options(threads),
                                       providers=["CPUExecutionProvider"])
        cache[call] = session, [node.op_type for node in model.graph.node]
    return cache[call]


class BoundCall:
    """One session's I/O binding over torch tensors: inputs bound by pointer (bound again when the address, shape or
    dtype changes), outputs written into tensors made once."""

    def __init__(self, session, outputs: list[torch.Tensor]):
        self.session, self.io = session, session.io_binding()
        self.names = [i.name for i in session.get_inputs()]
        self.pointers: dict[str, tuple] = {}                      # name -> (address, shape, dtype) bound
        self.outputs = outputs
        for out, tensor in zip(session.get_outputs(), outputs):
            self._bind(self.io.bind_output, out.name, tensor)

    @staticmethod
    def _bind(bind, name: str, tensor: torch.Tensor) -> None:
        if not tensor.is_contiguous() or tensor.device.type != "cpu":
            raise ValueError(f"{name}: the runtime reads contiguous CPU tensors, got {tensor.device} "
                             f"{'contiguous' if tensor.is_contiguous() else 'strided'}")
        bind(name, "cpu", 0, torch.empty(0, dtype=tensor.dtype, device="cpu").numpy().dtype, tuple(tensor.shape),
             tensor.data_ptr())

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        for name, tensor in zip(self.names, inputs):
            bound = (tensor.data_ptr(), tensor.shape, tensor.dtype)       # a new tensor may reuse a freed address
            if self.pointers.get(name) != bound:
                self._bind(self.io.bind_input, name, tensor)
                self.pointers[name] = bound
        self.session.run_with_iobinding(self.io)
        return self.outputs


def output_buffers(module: nn.Module, inputs: tuple) -> list[torch.Tensor]:
    """Empty tensors of the shapes and dtypes of module(*inputs)'s outputs (one eager call)."""
    with torch.no_grad():
        return [torch.empty_like(o).contiguous() for o in module(*inputs)]


class RuntimeStep(FusedStep):
    """`FusedStep` (its tables, groups and outputs) run by ONNX Runtime: see the module docstring. The runtime is the
    core's predictor's kernel; the session follows the core's weights (`FusedCore.generation`)."""

    def __init__(self, core: FusedCore, tree: SparseTree | None, prenorm: bool = False):
        super().__init__(core, tree, prenorm)
        self.bind()

    def bind(self) -> None:
        """The session of this call over the core's weights as they are now, and its bound buffers."""
        core, tree = self.core, self.tree
        inputs = self.example_inputs(1)
        key = ("step", tuple(map(tuple, tree.paths)) if tree is not None else None, self.prenorm)
        traced = FusedStep(core, tree, self.prenorm)              # the gathered call, as Core ML traces it
        session, self.ops = runtime_session(core, key, traced, inputs, ["tokens", "k_cache", "v_cache", "t"],
                                            list(self.outputs), core.predictor.kernel)
        self.tokens, self.t = torch.zeros_like(inputs[0]), torch.zeros_like(inputs[3])
        self.bound, self.bound_generation = BoundCall(session, output_buffers(traced, inputs)), core.generation

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor):
        if self.bound_generation != self.core.generation:
            self.bind()
        self.tokens.copy_(tokens)
        self.t.copy_(t.reshape(1))
        return tuple(self.bound(self.tokens, k_cache, v_cache, self.t))


class _PrefillCall(nn.Module):
    def __init__(self, core: FusedCore, prenorm: bool):
        super().__init__()
        self.core, self.prenorm = core, prenorm

    def forward(self, g, c0, k_cache, v_cache):
        return self.core.prefill(g, c0, k_cache, v_cache, self.prenorm)


class RuntimePrefill(nn.Module):
    """`FusedCore.prefill` (batch 1) run by ONNX Runtime, for a frame whose round drafts with `drafts` (a
    `round.Drafts`; None: the AR frame). forward(g [1, Ht], c0 [1], k, v, prenorm) -> logits of c1 [1, V], k_new,
    v_new [L, 1, kv, 2, d], state [1, H] (h_1, or r_1 for a prenorm drafter)."""

    def __init__(self, core: FusedCore, drafts: nn.Module | None = None):
        super().__init__()
        self.core, self.prenorm = core, bool(drafts is not None and drafts.drafter.prenorm)   # r_1 for its drafter
        self.bind()

    def bind(self) -> None:
        """The session of the prefill over the core's weights as they are now, and its bound buffers."""
        core = self.core
        traced, (k, v), device = _PrefillCall(core, self.prenorm), core.empty_cache(1), core.heads.device
        inputs = (torch.zeros(1, core.predictor.c0_embedding.embedding_dim, dtype=core.heads.dtype, device=device),
                  torch.zeros(1, dtype=torch.long, device=device), k, v)
        session, self.ops = runtime_session(core, ("prefill", self.prenorm), traced, inputs,
                                            ["g", "c0", "k_cache", "v_cache"], ["logits", "k_new", "v_new", "state"],
                                            core.predictor.kernel)
        self.g, self.c0 = torch.zeros_like(inputs[0]), torch.zeros_like(inputs[1])
        self.bound, self.bound_generation = BoundCall(session, output_buffers(traced, inputs)), core.generation

    def forward(self, g, c0, k_cache, v_cache, prenorm: bool = False):
        if prenorm != self.prenorm:
            raise ValueError(f"this prefill returns {'r_1' if self.prenorm else 'h_1'}, asked for prenorm={prenorm}")
        if g.shape[0] != 1:
            raise ValueError(f"the runtime's prefill decodes one stream (batch 1), got batch {g.shape[0]}")
        if self.bound_generation != self.core.generation:
            self.bind()
        self.g.copy_(g)
        self.c0.copy_(c0)
        return tuple(self.bound(self.g, self.c0, k_cache, v_cache))
