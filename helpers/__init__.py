"""RVQ position-aware speculative decoding of the Qwen3-TTS code predictor: the notebooks' helper package.

Folders by layer, imports running downward only (tests/test_architecture.py checks it):

    artifacts    atomic writes, safetensors / JSON, cached build steps      (imports nothing of ours)
    method/      sampler, trees, drafters, the code-predictor call, fused call, decoders, calibration
    adapter/     our decoders inside the official qwen_tts classes: talker inputs, the drop-in switch
    backends/    the interface and its two backends: mini (offline miniature), qwen3 (the real model)
    measure/     latency, phase profile, Core ML export
    report/      tables, figures, report.md, the paper's numbers
    experiment/  run/ (parameters, the runner, metrics.json), stages/ (the cached stages, shards), bench/, preflight/

`python -m helpers PARAMS` runs the notebook sequence (helpers.experiment.run.runner).
"""

import os as _os

from helpers.backends.mini.numerics import set_global_pins as _set_global_pins

_set_global_pins()      # before numpy / torch load: every process of the project on one set of numerical paths
                        # (numerics.py), unless the caller sets its own; import helpers first

if _os.environ.get("RVQ_PROGRESS_LOG"):      # under the runner: bars and build notes to its log, not the notebook
    from helpers.experiment.run.quiet import route_progress as _route

    _route(_os.environ["RVQ_PROGRESS_LOG"])
