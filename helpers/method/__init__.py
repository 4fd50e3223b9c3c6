"""The method: everything speculative decoding of the code predictor is, on plain tensors.

`sampling` (the shared inverse-CDF sampler, one uniform per code position), `tree` (sparse trees and their
buffers), `predictor` (the code predictor as one explicit call over a static KV cache: the reference decoder
stack), `drafters` (reused heads, position offsets, Medusa heads), `main_drafter` (which offset placement a run
reports), `fused/` (the fused draft+verify call the decoders run and a device exports: core, step, plans),
`decoding` (AR and speculative `decode_frame`), `compiled/` (every call of a frame as one module that samples,
walks and commits on the device, compiled or graph-captured), `clock` (the phase-clock protocol the decoders report
to), `calibration`, `ceiling`, `training`, `replay`, `parity` (AR vs speculative codes: frames identical, and a
per-position chi-square where they need not be), `rounds` (a decoded round as a record), `checks` (the one
integer-setting check, used by every layer).

Imports: torch and `helpers.artifacts` only (and numpy / scipy for `parity`'s test). The method reads the
official modules' weights by attribute (duck typing) and knows no backend, no adapter and no experiment.
"""
