# Two commands: `make run` (the demo / main job, offline) and `make test`. Both set everything up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run mini test test-fast bench bench-gpu gpu-pack peers lab clean

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

test: setup peers
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(TWO)      # tiny models: one thread each, no oversubscription

# The development tier: every test but the slow ones (the smoke miniature, the tiny real checkpoint, the notebook
# sequence); the method's exactness tests are all in it. CI runs `make test`.
test-fast: setup peers
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(TWO) -m "not slow"

# Latency sweep (q = 1 vs q = N + 1) and whole-frame inner loop (official generate vs AR vs speculative)
# on the miniature of params/mini.yaml (its cached stages, shared with make run; built if absent), and where
# a round's time goes phase by phase; prints the tables, saves outputs/bench/latency_mini_cpu.json.
bench: setup peers
	$(PY) -m helpers.experiment.bench.bench

# Where speculation must pay: a GPU at batch 1 (scripts/bench_gpu.py; docs/gpu.md runs it on a bare CUDA machine).
# Reads the shipped miniature (outputs/gpu-pack/) and writes outputs/gpu-reference/ (JSON and Markdown); ~5 minutes.
bench-gpu: setup
	$(PY) scripts/bench_gpu.py --out outputs/gpu-reference

# Rebuild outputs/gpu-pack/ (what bench-gpu reads) from the cached stages of params/mini.yaml (built if absent).
gpu-pack: setup
	$(PY) -m helpers.experiment.bench.inner_loop_pack --params params/mini.yaml --out outputs/gpu-pack

# The peers a CPU user would run instead of our decoder (helpers/measure/peers/): llama.cpp through llama-cpp-python,
# built once from its sdist for this CPU (-march=native) with clang, 2 jobs (~6-7 minutes on 2 cores), and gguf to
# write its model files. Not GCC: Debian's GCC 12 drops the tile configuration of llama.cpp's AMX int8 kernels
# (its _tile_loadconfig reads only 8 bytes of the config; an upstream fix is open), which crashes on batches of more
# than one row. clang 14 spells the AMX macro __AMXINT8__, not the __AMX_INT8__ ggml tests, so it is defined
# where the CPU has AMX (-march=native enables the instructions). The stamp records what was built and how long it
# took; `helpers.measure.peers.llama.llama_build` reports it with every timing.
PEERS        := $(VENV)/.peers
LLAMA_PY     := llama-cpp-python==0.3.36
PEERS_AMX    := $(if $(shell grep -m1 -o amx_int8 /proc/cpuinfo 2>/dev/null),-D__AMX_INT8__)
PEERS_CMAKE  := -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGGML_NATIVE=ON \
                -DCMAKE_C_FLAGS=$(PEERS_AMX) -DCMAKE_CXX_FLAGS=$(PEERS_AMX) -DLLAVA_BUILD=OFF \
                -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

peers: $(PEERS)

$(PEERS): | $(STAMP)
	command -v clang++ > /dev/null || { apt-get update -qq && apt-get install -y -qq clang; }
	$(PY) -m pip install --quiet gguf==0.19.0
	start=$$(date +%s) && \
	CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(PEERS_CMAKE)" $(PY) -m pip install --quiet --no-cache-dir \
	    --force-reinstall --no-deps --no-binary llama-cpp-python $(LLAMA_PY) && \
	$(PY) -m pip install --quiet $(LLAMA_PY) && \
	echo "$(LLAMA_PY) built with $$(clang --version | head -1), CMAKE_ARGS: $(PEERS_CMAKE), in $$(( $$(date +%s) - start )) s" > $@

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

clean:
	rm -rf $(VENV) .pytest_cache
