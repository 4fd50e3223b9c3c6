"""The experiment: a run from a parameter file, the layer the notebooks and command lines use.

`params` (RunParams: one schema, validation, `notebook_params`), `setup` (a notebook's first line:
`P, out = setup(globals())`), `process` (the process-wide settings, set where a process starts, and only there),
`stage_cache` (what a stage's artifacts depend on, the per-process memo, `clear_caches`), `backend_factory` (the
run's backend, sampler, and its code predictor in another dtype), `stages` (cached stages data -> drafters ->
calibration -> evaluation), `ideal` (the ideal drafter's jobs), `quality` (the quality stage: PER / WER and
parity), `pool` (a stage's jobs on worker processes), `metrics` (metrics.json), `runner` (`python -m helpers
PARAMS`: the notebooks in order with papermill), `bench` (`make bench`), `shards` (scale-out of extraction and
evaluation).

Imports: any layer below.
"""
