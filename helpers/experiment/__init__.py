"""The experiment: a run from a parameter file, the layer the notebooks and command lines use.

`params` (RunParams: one schema, validation, `notebook_params`), `setup` (a notebook's first line:
`P, out = setup(globals())`), `stages` (cached stages data -> drafters -> calibration -> evaluation -> wer,
and the backend factory), `metrics` (metrics.json), `runner` (`python -m helpers PARAMS`: the notebooks in
order with papermill), `bench` (`make bench`), `shards` (scale-out of extraction and evaluation).

Imports: any layer below.
"""
