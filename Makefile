# Two commands: `make run` (the demo / main job, offline) and `make test`. Both set everything up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run mini test test-fast bench bench-gpu gpu-pack lab clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e .
	$(PY) -m ipykernel install --sys-prefix --name rvq-spec --display-name "rvq-spec (.venv)" > /dev/null
	touch $(STAMP)

# The main job on the offline default: the notebook sequence on params/mini.yaml (the miniature is built
# and cached on the first run) into outputs/mini/.
run: setup
	$(PY) -m helpers params/mini.yaml

# The trained miniature that `make run` takes instead of training it: built from scratch (9-21 minutes on
# 2 cores) and written to outputs/mini-trained/, which is committed. Run it after changing the miniature's build.
mini: setup
	$(PY) -m helpers params/mini.yaml --ship

# Two test processes (pytest-xdist), one thread each: the tests that share the smoke miniature or the tiny real
# checkpoint run in one process (their group), so each is built once.
TWO    := -n 2 --dist loadgroup

test: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(TWO)      # tiny models: one thread each, no oversubscription

# The development tier: every test but the slow ones (the smoke miniature, the tiny real checkpoint, the notebook
# sequence); the method's exactness tests are all in it. CI runs `make test`.
test-fast: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(TWO) -m "not slow"

# Latency sweep (q = 1 vs q = N + 1) and whole-frame inner loop (official generate vs AR vs speculative)
# on the miniature of params/mini.yaml (its cached stages, shared with make run; built if absent), and where
# a round's time goes phase by phase; prints the tables, saves outputs/bench/latency_mini_cpu.json.
bench: setup
	$(PY) -m helpers.experiment.bench.bench

# Where speculation must pay: a GPU at batch 1 (scripts/bench_gpu.py; docs/gpu.md runs it on a bare CUDA machine).
# Reads the shipped miniature (outputs/gpu-pack/) and writes outputs/gpu-reference/ (JSON and Markdown); ~5 minutes.
bench-gpu: setup
	$(PY) scripts/bench_gpu.py --out outputs/gpu-reference

# Rebuild outputs/gpu-pack/ (what bench-gpu reads) from the cached stages of params/mini.yaml (built if absent).
gpu-pack: setup
	$(PY) -m helpers.experiment.bench.inner_loop_pack --params params/mini.yaml --out outputs/gpu-pack

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

clean:
	rm -rf $(VENV) .pytest_cache
