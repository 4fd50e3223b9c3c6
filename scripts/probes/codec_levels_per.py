"""Probe: the miniature codec's round-trip PER when only its first k levels are decoded (evaluation role).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/codec_levels_per.py --cache-dir outputs/cache/mini 1 2 4 8 16

Reads the built miniature (speech, codec, recogniser) from the cache; prints the PER per language and its mean.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import helpers  # noqa: E402,F401  (first: its numerical pins take effect only before numpy and torch load)
import numpy as np  # noqa: E402

from helpers.artifacts import load_json, load_tensors  # noqa: E402
from helpers.backends.mini.build import MINI, fixed_threads  # noqa: E402
from helpers.backends.mini.codec import RVQCodec  # noqa: E402
from helpers.backends.mini.phoneme_asr import phoneme_error_rate, recogniser, reference_tokens  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("levels", nargs="+", type=int, help="numbers of levels to decode (1..16)")
    ap.add_argument("--cache-dir", default="outputs/cache/mini")
    args = ap.parse_args()
    cache = Path(args.cache_dir)
    speech, codec_dir = next(cache.glob("speech-*")), next(cache.glob("codec-*"))
    codec = RVQCodec.load(codec_dir / "codec.safetensors")
    rows = load_json(speech / "manifest.json")["evaluation"]
    t = load_tensors(codec_dir / "codes.safetensors")
    codes, offsets = t["evaluation.codes"].numpy(), t["evaluation.offsets"].tolist()
    langs, refs = [r["lang"] for r in rows], [reference_tokens(r["phonemes"]) for r in rows]
    with fixed_threads(1):
        rec, _ = recogniser(MINI.recogniser, speech, cache, log=lambda line: None)
        for k in args.levels:
            hyp = rec.recognise([codec.decode(codes[offsets[i]:offsets[i + 1]], stages=k) for i in range(len(rows))])
            per = {lang: phoneme_error_rate([r for r, x in zip(refs, langs) if x == lang],
                                            [h for h, x in zip(hyp, langs) if x == lang]) for lang in sorted(set(langs))}
            print(f"levels {k:2d}: PER mean {np.mean(list(per.values())):.3f}  "
                  + " ".join(f"{lang} {v:.3f}" for lang, v in per.items()), flush=True)


if __name__ == "__main__":
    main()
