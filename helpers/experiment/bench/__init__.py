"""The benchmarks and estimates: `make bench` (`python -m helpers.experiment.bench.bench`: latency sweeps and whole
frames on the miniature and at the 0.6B shape), every CPU deployment side by side (`deployment_bench`, also notebook
06), the files a GPU benchmark reads (`inner_loop_pack`, `make bench-gpu`) and how much decoding a run's parameters
ask for (`run_size`, scripts/run_estimate.py).
"""
