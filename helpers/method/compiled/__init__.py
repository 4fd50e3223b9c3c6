"""Compiled calls: each call of a frame as one module that samples, walks and commits on the device.

The eager decoders (`helpers.method.decoding`) stay the reference. Here every call the decoders make is one
`nn.Module` whose forward does everything the host did between two calls, so it can be compiled as one graph
(`torch.compile` / inductor, CPU or CUDA) or captured as one CUDA graph; `t` is a [1] tensor input, so one graph
serves every root position:

- `PrefillCall(g [1, Ht], c0 [1], k, v, u [15], codes [15])` -> first query [1, q]: the prefill, KV slots 0, 1
  written in place, c1 sampled (u[0]) and written to codes[0], round 1's drafts from h_1 (speculative).
- `ARCall(token [1, 1], k, v, t [1], u, codes)` -> c_{t+1} [1, 1]: the q = 1 call, KV slot t + 1, codes[t].
- `RoundCall(query [1, q], k, v, t, u, codes)` -> (next query [1, q], t_new [1]): the verify call over one
  (pruned) tree, every query token sampled with its own uniform u[t + depth], the walk (a node is accepted when
  it and every ancestor equal their parent's sample; the stop node is the deepest accepted one), the accepted
  path's codes and KV written at fixed offsets t .. t + D with `index_copy_` (entries past the stop land in
  slots still masked and are overwritten later: no allocation, no data-dependent shape), and the next round's
  drafts computed from the stop node's hidden state only (`StopDrafts`; the eager fused call drafts from
  every node because its walk runs on the host after the call).

Caches k, v [L, 1, kv, S, d], the uniforms and the codes are the decoder's own buffers, passed by identity.
The host loop per round is one call and one `int(t_new)` (to pick the next pruned tree's graph); the AR loop
reads nothing until the frame ends. Pruned trees are prefixes of the full tree's query order, so a round's
next query serves the next plan as `query[:, :q]`.

`compile` modes (`COMPILE_MODES`): "none" (the same modules run eagerly), "inductor" (torch.compile, static
shapes, no graph breaks; C++ wrapper on CPU), "cuda_graph" (one CUDA graph per module, replayed from static
buffers; CUDA only). `torch_backend` overrides torch.compile's backend (tests: "aot_eager", no C++ build).

The package, one idea a file: `calls.py` (the call modules, the walk on the device), `compiler.py` (the modes and
how a module is compiled or captured), `decoders.py` (`CompiledAR`, `CompiledSpeculative`: the host loops).
"""

from helpers.method.compiled.calls import ARCall, PrefillCall, RoundCall, StopDrafts
from helpers.method.compiled.compiler import COMPILE_MODES, CallCompiler, check_compile_mode
from helpers.method.compiled.decoders import CompiledAR, CompiledSpeculative

__all__ = ["ARCall", "COMPILE_MODES", "CallCompiler", "CompiledAR", "CompiledSpeculative", "PrefillCall", "RoundCall",
           "StopDrafts", "check_compile_mode"]
