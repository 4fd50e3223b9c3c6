"""The experiment: a run from a parameter file, the layer the notebooks and command lines use. Four folders:

    run/        what runs a parameter file: `params` (RunParams: one schema, validation, `notebook_params`),
                `runner` (`python -m helpers PARAMS`: the notebooks in order with papermill), `miniature` (the
                runner's first step on the mini backend), `setup` (a notebook's first line: `P, out =
                setup(globals())`), `metrics` (metrics.json), `process` (the process-wide settings), `pool` (a
                stage's jobs on worker processes), `backend_factory` (the run's backend and sampler), the
                notebooks' plumbing (`quiet`, `progress`, `controls`, `audio`) and the checks of an executed
                notebook (`notebook_check`, `labelled_numbers`)
    stages/     the cached stages the notebooks call: `stages` (data -> drafters -> calibration -> evaluation),
                `stage_cache` (what a stage's artifacts depend on, the per-process memo, `clear_caches`),
                `data_stage`, `ideal` (the ideal drafter's jobs), `quality` (PER / WER and parity),
                `codec_round_trip`, `drift` (the positional mismatch on a controlled model), `shards` (scale-out
                of extraction)
    bench/      the benchmarks and estimates: `bench` (`make bench`), `deployment_bench` (every CPU deployment
                side by side), `inner_loop_pack` (the files `make bench-gpu` reads), `run_size` (how much decoding
                a run's parameters ask for)
    preflight/  what a real-model run needs, checked before any large download

Imports: any layer below.
"""
