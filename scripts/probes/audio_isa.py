"""Probe (issue 23, item 5): which library's instruction-set choice moves the miniature's audio path (decode, then the
phoneme recogniser). Each setting runs in a fresh process (the choices are read when the libraries load) and prints a
hash of the decoded audio and of the transcripts of the first `--runs` AR evaluation syntheses of a finished run.

    .venv/bin/python scripts/probes/audio_isa.py --params params/mini.yaml --runs 12

Measured on an AVX2-only AMD EPYC (2026-12-03): numpy's runtime dispatch is the step. Its AVX2 paths switched off
(`NPY_DISABLE_CPU_FEATURES`) give other audio and other transcripts. ATen at its `default` (unvectorised) capability
and oneDNN capped at SSE4.1 give the same audio and transcripts. AVX-512 switched off gives the same here, where
there is none: that pin (`helpers.backends.mini.numerics`) is what makes an AVX-512 machine take this machine's paths.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from helpers.backends.mini.numerics import NUMPY_AVX512

CHILD = """
import hashlib, json, sys
from helpers.experiment.params import load_params
from helpers.experiment import stages
P = load_params(sys.argv[1])
b = stages.backend(P)
ar, _ = stages.syntheses(P)
audio = [b.decode(r.codes) for r in ar[:int(sys.argv[2])]]
hyps = b.recognise_phonemes(audio)
print(json.dumps({"audio": hashlib.sha1(b"".join(a.tobytes() for a in audio)).hexdigest()[:12],
                  "transcripts": hashlib.sha1(json.dumps(hyps).encode()).hexdigest()[:12]}))
"""

SETTINGS = {
    "as pinned": {},
    "numpy without AVX2": {"NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512 + ",AVX2"},
    "numpy without AVX-512 (the pin itself)": {"NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512},
    "ATen unvectorised": {"ATEN_CPU_CAPABILITY": "default"},
    "oneDNN at SSE4.1": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--runs", type=int, default=12)
    args = ap.parse_args()
    results = {}
    for name, extra in SETTINGS.items():
        env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
        out = subprocess.run([sys.executable, "-c", CHILD, args.params, str(args.runs)], env=env, capture_output=True,
                             text=True, check=True)
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:40s} {results[name]}", flush=True)
    base = results["as pinned"]
    for name, r in results.items():
        print(f"{name:40s} audio {'same' if r['audio'] == base['audio'] else 'DIFFERS'}, "
              f"transcripts {'same' if r['transcripts'] == base['transcripts'] else 'DIFFER'}")


if __name__ == "__main__":
    main()
