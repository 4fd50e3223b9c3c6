"""The method: everything speculative decoding of the code predictor is, on plain tensors.

`tree` (sparse trees and their device tables `TreeIndex`), `predictor` (the code predictor as one explicit call
over a static KV cache, at any query), `stack` (the one decoder stack, `FusedCore.layers`, and the verify call over
it, `FusedStep`, with the CPU's eager call at a host int, `ViewStep`), `drafters` (reused heads, position offsets,
Medusa heads; `top_candidates`, the one drafting of candidates), `main_drafter` (which offset placement a run
reports), `sampler` (the shared inverse-CDF sampler and a frame's uniforms), `round` (one speculative round on the
device, its phases as methods: verify, accept, commit, draft; the walk `accept`, the query's packing `pack_query`,
the prefill and the AR step), `decoding` (the decoder: AR and speculative `decode_frame`, eager, compiled and
captured, one runner per mode, its modules the face measurement uses; the frame loops, k rounds per graph),
`compiler` (the compile modes: eager, inductor, CUDA graphs, and `CapturedGraph`), `capture` (the guard that refuses
what CUDA-graph capture refuses, and the kernel counts), `kernels` (the CPU deployment: linear layers laid out for
its matrix kernels), `runtime_graph` and `runtime_step` (the calls through ONNX Runtime), `export_step` (the call a
Core ML export adds drafts to), `calibration`, `ceiling`, `diagnostics`, `training`, `replay`, `parity` (AR vs
speculative codes: frames identical, and a per-position chi-square where they need not be), `round_records` (a
decoded round as a record), `checks` (the one integer-setting check, used by every layer).

Imports: torch and `helpers.artifacts` only (and numpy / scipy for `parity`'s test). The method reads the
official modules' weights by attribute (duck typing) and knows no backend, no adapter and no experiment.
"""
