"""The method: everything speculative decoding of the code predictor is, on plain tensors.

`sampling` (the shared inverse-CDF sampler, one uniform per code position), `tree` (sparse trees and their buffers),
`predictor` (the code predictor as one explicit call over a static KV cache, at any query), `kernels` (the
deployment layouts of its linear layers), `drafters` (reused heads, position offsets, Medusa heads), `main_drafter`
(which offset placement a run reports), `fused/` (the one decoder stack, `FusedCore.layers`, and the fused verify
call the decoders run and a device exports: core, step), `round` (one speculative round on the device: draft,
verify, accept, commit; the AR step and frame), `frame` (k rounds per captured graph, one host read for most
frames), `decoding` (AR and speculative `decode_frame`), `compiler` (the compile modes: eager, inductor, CUDA
graphs), `capture` (the guard that refuses what CUDA-graph capture refuses, and the kernel counts), `clock` (the
phase-clock protocol the decoders report to), `calibration`, `ceiling`, `diagnostics`, `training`, `replay`,
`parity` (AR vs speculative codes: frames identical, and a per-position chi-square where they need not be), `rounds`
(a decoded round as a record), `checks` (the one integer-setting check, used by every layer).

Imports: torch and `helpers.artifacts` only (and numpy / scipy for `parity`'s test). The method reads the
official modules' weights by attribute (duck typing) and knows no backend, no adapter and no experiment.
"""
