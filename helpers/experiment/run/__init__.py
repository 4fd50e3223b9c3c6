"""What runs a parameter file: the parameters (`params`), the runner (`python -m helpers PARAMS`, `runner`) and
its first step (`miniature`), a notebook's first line (`setup`) and its metrics.json (`metrics`), the process-wide
settings (`process`), a stage's jobs on worker processes (`pool`), the run's backend (`backend_factory`), what a
running notebook prints and shows (`quiet`, `progress`, `controls`, `audio`), and what an executed notebook must
not hold (`notebook_check`, `labelled_numbers`). The stages themselves are in `helpers.experiment.stages`.
"""
