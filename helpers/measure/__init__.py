"""Measurement: what the method costs on a device.

`timing` (the one timing harness: percentiles of calls, frames interleaved across systems in a shuffled
order), `latency` (per-call sweep q = 1 vs q = N + 1, whole frames against the official `generate`),
`phases` (the phase clock and the decoders' phases, marked from outside the method; the round up to a phase),
`profile` (where a round's time goes, phase by phase), `compiled_latency` (eager vs compiled whole frames
side by side, the CUDA-graph comparison, the compiled round's parts), `coreml_export` (the AR and fused calls as Core ML
packages), `walkthrough` (one decoded round and a frame's calls, for the notebooks' figures). Every decoder here is
built through `helpers.method.decoding.Decoder` and timed, clocked or counted through its modules (`Decoder.modules`).

Imports: `helpers.method`, `helpers.adapter`, `helpers.artifacts`; never the experiment.
"""
