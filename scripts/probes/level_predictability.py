"""Probe: how predictable each codec level is from what the code predictor can know, for codec variants, before any
miniature is trained on them (a proxy for the ideal drafter's top-1).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/level_predictability.py --cache-dir outputs/cache/mini \\
        base "pca_dim=15" "design='residual'" --context talker pitch oracle

Per variant (CodecConfig keywords; `base` is the default codec) the codec is fitted on the pretrain speech and
encodes pretrain and pretrain_val. For levels 1, 2, 3, 5, 8, 11 and 15 a small classifier (a sum of context-symbol
embeddings, one hidden layer; the epoch of lowest held-out loss is kept) learns c_k on pretrain and is scored on pretrain_val: held-out
cross-entropy (nats), top-1 and the mean top probability, beside the level's marginal entropy H. Contexts:

- `talker`: what the code predictor can know: the frame's phoneme and the three before it (the text up to the
  frame), its position within the phoneme, speaker, language, all 16 codes of the previous frame and c0..c_{k-1};
- `pitch`: talker + the frame's F0, energy and F0 slope (16-24 quantile buckets): what a prosody input would add;
- `oracle`: talker + the next three phonemes, the phoneme's length and the next frame's codes (what no causal
  model has: an upper bound on what information can do).

Reads the speech of a built miniature (`speech-*` under --cache-dir); prints one line per variant and context.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import helpers  # noqa: E402,F401  (first: its numerical pins take effect only before numpy and torch load)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from helpers.artifacts import load_json  # noqa: E402
from helpers.backends.languages import CODES as LANGS  # noqa: E402
from helpers.backends.mini import espeak  # noqa: E402
from helpers.backends.mini.build import _role_audio, fixed_threads  # noqa: E402
from helpers.backends.mini.codec import NUM_CODEBOOKS, STACK, CodecConfig, fit_codec, frame_features  # noqa: E402

LEVELS = (1, 2, 3, 5, 8, 11, 15)
CONTEXTS = ("talker", "pitch", "oracle")
TABLE = 400                                  # ids per context table (phonemes, codes + 1, buckets all fit)
PROSODY_BUCKETS = (24, 16, 8)                # log F0, log energy, F0 slope


def prosody(audio: np.ndarray, frames: int) -> np.ndarray:
    """Per frame: median log F0 over its hops, log energy, log F0 slope across the frame -> [frames, 3]."""
    import librosa
    n = frames * STACK
    f0 = librosa.yin(audio, fmin=60, fmax=500, sr=16000, frame_length=1024, hop_length=160)
    rms = librosa.feature.rms(y=audio, frame_length=1024, hop_length=160)[0]
    pad = lambda x: np.concatenate([x, np.repeat(x[-1:], max(0, n - len(x)))])[:n].reshape(frames, STACK)
    lf, e = np.log(pad(f0)), pad(rms)
    return np.stack([np.median(lf, 1), np.log(e.mean(1) + 1e-5), lf[:, -1] - lf[:, 0]], 1)


def frame_context(row: dict, codes: np.ndarray, index: dict, context: str, buckets: np.ndarray | None) -> list:
    """Per frame t: [(table name, id)] of the context symbols (0 = none)."""
    ph = [index[p] for p in row["phonemes"]]
    T, speakers = len(ph), list(espeak.SPEAKERS)
    pos, run = np.zeros(T, int), np.zeros(T, int)
    for t in range(1, T):
        pos[t] = pos[t - 1] + 1 if ph[t] == ph[t - 1] else 0
    for t in range(T - 1, -1, -1):
        run[t] = run[t + 1] if t < T - 1 and ph[t] == ph[t + 1] else pos[t] + 1
    out = []
    for t in range(T):
        f = [("speaker", speakers.index(row["speaker"])), ("lang", list(LANGS).index(row["lang"])),
             ("pos", min(pos[t], 15))] + [(f"ph-{d}", ph[t - d] if t >= d else 0) for d in range(1, 4)]
        f += [(f"prev{k}", int(codes[t - 1, k]) + 1 if t else 0) for k in range(NUM_CODEBOOKS)]
        if context == "pitch":
            f += [(f"prosody{j}", int(buckets[t, j])) for j in range(3)]
        if context == "oracle":
            f += [("run", min(run[t], 15))] + [(f"ph+{d}", ph[t + d] if t + d < T else 0) for d in range(1, 4)]
            f += [(f"next{k}", int(codes[t + 1, k]) + 1 if t + 1 < T else 0) for k in range(NUM_CODEBOOKS)]
        out.append(f)
    return out


def as_ids(frames: list, names: list[str]) -> np.ndarray:
    """[N, F] global ids: table j's ids start at (NUM_CODEBOOKS + j) * TABLE (the first tables: the lower codes)."""
    offset = {n: (NUM_CODEBOOKS + j) * TABLE for j, n in enumerate(names)}
    return np.array([[offset[n] + v for n, v in f] for f in frames], np.int64)


def lower_codes(codes: np.ndarray, k: int) -> np.ndarray:
    """c_0..c_{k-1} of each frame as ids of tables 0..k-1 ([N, 15]; id 0 of each table: not given)."""
    j = np.arange(NUM_CODEBOOKS - 1)
    return np.where(j[None] < k, j[None] * TABLE + codes[:, :NUM_CODEBOOKS - 1] + 1, 0)


def fit_level(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray, classes: int, tables: int,
              epochs: int = 4, seed: int = 0) -> tuple[float, float, float]:
    """Held-out (cross-entropy, top-1, mean top probability) of the best epoch."""
    torch.manual_seed(seed)
    emb = nn.EmbeddingBag(tables * TABLE, 256, mode="sum")
    net = nn.Sequential(nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, classes))
    opt = torch.optim.Adam([*emb.parameters(), *net.parameters()], lr=3e-3)
    X, Y, Xv, Yv = (torch.from_numpy(a) for a in (x, y, xv, yv))
    gen, best = torch.Generator().manual_seed(seed), (float("inf"), 0.0, 0.0)
    for _ in range(epochs):
        net.train()
        for b in torch.randperm(len(X), generator=gen).split(512):
            loss = nn.functional.cross_entropy(net(emb(X[b])), Y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            logits = net(emb(Xv))
        ce = nn.functional.cross_entropy(logits, Yv).item()
        if ce < best[0]:
            best = (ce, (logits.argmax(1) == Yv).double().mean().item(), logits.softmax(1).amax(1).mean().item())
    return best


def probe(data: dict, symbols: list[str], cfg: CodecConfig, contexts: list[str], epochs: int = 4) -> dict:
    tr, va = data["pretrain"], data["pretrain_val"]
    codec = fit_codec(tr["feats"], cfg, tr["phonemes"], symbols)
    codes = {role: [codec.encode_features(f, p) for f, p in zip(d["feats"], d["phonemes"])]
             for role, d in data.items()}
    index = {s: i + 1 for i, s in enumerate(symbols)}
    out = {}
    for context in contexts:
        edges = None
        if context == "pitch":
            every = np.concatenate(tr["prosody"])
            edges = [np.quantile(every[:, j], np.linspace(0, 1, n + 1)[1:-1]) for j, n in enumerate(PROSODY_BUCKETS)]
        ids = {}
        for role, d in data.items():
            frames = []
            for i, (row, c) in enumerate(zip(d["rows"], codes[role])):
                b = None if edges is None else np.stack([np.searchsorted(edges[j], d["prosody"][i][:, j])
                                                         for j in range(3)], 1)
                frames += frame_context(row, c, index, context, b)
            names = [n for n, _ in frames[0]]
            ids[role] = as_ids(frames, names)
        tables = NUM_CODEBOOKS + len(names)
        y = {role: np.concatenate(codes[role]) for role in data}
        rows = []
        for k in LEVELS:
            p = np.bincount(y["pretrain"][:, k], minlength=codec.sizes[k]) / len(y["pretrain"])
            x, xv = (np.concatenate([ids[r], lower_codes(y[r], k)], 1) for r in ("pretrain", "pretrain_val"))
            ce, top1, pmax = fit_level(x, y["pretrain"][:, k], xv, y["pretrain_val"][:, k], codec.sizes[k], tables,
                                       epochs)
            rows.append(dict(level=k, K=codec.sizes[k], H=float(-(p[p > 0] * np.log(p[p > 0])).sum()), ce=ce,
                             top1=top1, pmax=pmax))
        out[context] = rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="'base' or CodecConfig keywords, e.g. \"pca_dim=15\"")
    ap.add_argument("--cache-dir", default="outputs/cache/mini")
    ap.add_argument("--context", nargs="+", default=["talker"], choices=CONTEXTS)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args()
    speech = next(Path(args.cache_dir).glob("speech-*"))
    audio, manifest = _role_audio(speech), load_json(speech / "manifest.json")
    symbols = sorted({p for rows in manifest.values() for r in rows for p in r["phonemes"]})
    with fixed_threads(1):
        data = {}
        for role in ("pretrain", "pretrain_val"):
            feats = [frame_features(a) for a in audio[role]]
            data[role] = dict(feats=feats, rows=manifest[role], phonemes=[r["phonemes"] for r in manifest[role]],
                              prosody=[prosody(a, len(f)) for a, f in zip(audio[role], feats)]
                              if "pitch" in args.context else None)
        for variant in args.variants:
            cfg = CodecConfig() if variant == "base" else eval(f"CodecConfig({variant})")  # a probe's command line
            for context, rows in probe(data, symbols, cfg, args.context, args.epochs).items():
                mean = {key: np.mean([r[key] for r in rows]) for key in ("H", "ce", "top1", "pmax")}
                print(f"{variant:36s} {context:7s} H {mean['H']:.2f}  CE {mean['ce']:.2f}  top-1 {mean['top1']:.3f}  "
                      f"top prob {mean['pmax']:.3f}  | top-1 by level "
                      + " ".join(f"c{r['level']} {r['top1']:.2f}" for r in rows), flush=True)


if __name__ == "__main__":
    main()
