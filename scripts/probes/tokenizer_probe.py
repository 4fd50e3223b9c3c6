"""Probe before you build (issue 23): per-level statistics of candidate tokenizers on the miniature's own speech.

Codecs compared, all at the miniature's 12.5 frames/s (one 640-d frame = 8 stacked 80-bin log-mel hops):
  a       today's codec (the build's `codec` step: group-residual PCA k-means, MINI sizes)
  b_phone today's acoustic stages, c0 replaced by a semantic code: the espeak phoneme sounding at the frame
          (c0's codeword = that phoneme's mean PCA latent; stages 1..15 refitted by k-means on what is left,
          same sizes, groups and iterations as today's codec)
  b_asr   the same with c0 = k-means (256) of the phoneme recogniser's last hidden layer, averaged per frame
          (a semantic code computed from audio, like the real tokenizer's)
  c       a learned residual VQ: tiny conv encoder / decoder over log-mel (temporal context), 16 levels of 256,
          EMA codebooks, k-means init, dead-code restart, quantizer dropout; trained on reconstruction
  d       c's design with level 0 = b_asr's semantic code (codeword = EMA class mean) and 15 learned levels

Per level k (train = the pretrain role, held out = pretrain_val, both all six languages and voices):
  usage entropy / log2 K; H(c_k) (plug-in, train) and its held-out cross-entropy (smoothed unigram);
  H(c_k | same level, previous frame): plug-in (train) and held-out CE of an interpolated bigram;
  held-out CE / top-1 / top-5 of small per-level MLPs predicting c_k from
      S1: c_0..c_{k-1}                      S2: c_0..c_{k-2} (depth 2: what a drafter at k-1 sees of k+1)
      F1: c_0..c_{k-1} + context            F2: c_0..c_{k-2} + context
    where context = all 16 codes of the previous frame + the phonemes of frames f-4..f (the streaming text the
    talker has read) + speaker + language: roughly what the code predictor's h_t can know. Level 0 of F1 is the
    proxy of the talker's c0 cross-entropy; "text" is c0 from the phoneme window + speaker + language alone;
  reconstruction: relative log-mel error (MSE / feature variance) with 1, 2, 4, 8, 16 levels, held out.
Held-out CE of any model trained on train frames bounds the true conditional entropy from above; the plug-in
estimates on train bound it (roughly) from below. Bits throughout; c0's text CE also in nats.

    OMP_NUM_THREADS=1 .venv/bin/python -u scripts/probes/tokenizer_probe.py --cache-dir outputs/cache/mini \
        --out outputs/probes/tokenizer_probe.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import helpers  # noqa: E402,F401  (first: its numerical pins take effect only before numpy and torch load)
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

L = 16                     # levels
WINDOW = (-4, -3, -2, -1, 0)   # phoneme context offsets (the talker reads text token f at frame f)
LN2 = math.log(2.0)


# ------------------------------------------------------------------------------------------------ data
def build_data(cache_dir: str, log=print):
    """The MINI speech, today's codec and (on demand) the phoneme recogniser, as the build makes and caches them."""
    from helpers.artifacts import cached_step, params_key, load_json, load_tensors
    from helpers.backends.mini.build import MINI, _speech_step, _codec_step, fixed_threads
    from helpers.backends.mini.codec import RVQCodec, frame_features
    cfg = MINI
    with fixed_threads(1):
        sp = dict(seed=cfg.seed, roles=cfg.roles(), speakers=cfg.speakers, eval_speaker=cfg.eval_speaker)
        speech = cached_step(cache_dir, "speech", sp, lambda f: _speech_step(cfg, f), log)
        cp = dict(speech=params_key(sp), codec=asdict(cfg.codec))
        codec_folder = cached_step(cache_dir, "codec", cp, lambda f: _codec_step(cfg, speech, f), log)
    manifest = load_json(speech / "manifest.json")
    t = load_tensors(speech / "audio.safetensors")
    out = {}
    for role in ("pretrain", "pretrain_val"):
        audio, offs = t[f"{role}.audio"].numpy(), t[f"{role}.offsets"].tolist()
        clips = [audio[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
        out[role] = dict(audio=clips, feats=[frame_features(a, cfg.codec.n_mels) for a in clips],
                         rows=manifest[role])
    return cfg, speech, RVQCodec.load(codec_folder / "codec.safetensors"), out


class Split:
    """Frame-level arrays of one role: features [N, 640], utterance id, phoneme / speaker / language ids."""

    def __init__(self, role, vocab, speakers, langs, keep=None):
        rows = role["rows"]
        idx = range(len(rows)) if keep is None else keep
        self.utts = list(idx)
        self.feats = [role["feats"][i] for i in idx]
        self.audio = [role["audio"][i] for i in idx]
        self.lengths = np.array([len(f) for f in self.feats])
        self.x = np.concatenate(self.feats).astype(np.float32)
        self.utt = np.repeat(np.arange(len(self.feats)), self.lengths)
        self.start = np.concatenate([[True] + [False] * (n - 1) for n in self.lengths])
        ph = [np.array([vocab.get(p, len(vocab)) for p in rows[i]["phonemes"]]) for i in idx]
        assert all(len(p) == n for p, n in zip(ph, self.lengths))
        pad = len(vocab) + 1                                 # before the utterance
        self.phon = np.concatenate([np.stack([_shift(p, o, pad) for o in WINDOW], 1) for p in ph])
        self.phone_id = np.concatenate(ph)
        self.spk = np.concatenate([np.full(n, speakers[rows[i]["speaker"]]) for i, n in zip(idx, self.lengths)])
        self.lang = np.concatenate([np.full(n, langs[rows[i]["lang"]]) for i, n in zip(idx, self.lengths)])

    def prev(self, codes, sizes):
        """codes of the previous frame, BOS (= the level's size) at an utterance's first frame."""
        p = np.roll(codes, 1, 0)
        p[self.start] = np.array(sizes)[None]
        return p


def _shift(p, o, pad):
    """q[f] = p[f + o] (pad outside)."""
    q = np.full(len(p), pad)
    if o <= 0:
        q[-o:] = p[:len(p) + o] if o else p
    else:
        q[:len(p) - o] = p[o:]
    return q


# ------------------------------------------------------------------------------------------------ codecs
def nearest(x, book):
    return np.argmin((book * book).sum(1)[None] - 2.0 * x @ book.T, axis=1)


class SemanticGroupCodec:
    """Today's codec (PCA, group residual stages, same sizes) with c0 = a given label, codeword = class mean."""

    def __init__(self, base, train_x, labels0, n_classes, kmeans_iters, seed=0):
        from helpers.backends.mini.codec import _kmeans
        self.base, self.n = base, n_classes
        lat = (train_x - base.mean) @ base.proj
        self.c0 = np.zeros((n_classes, lat.shape[1]), np.float32)
        for c in range(n_classes):
            m = labels0 == c
            if m.any():
                self.c0[c] = lat[m].mean(0)
        res = lat - self.c0[labels0]
        self.books = []
        cfg = base.config
        for t in range(1, L):
            d = base.dims[t]
            book = _kmeans(res[:, d], cfg.sizes[t], cfg.seed * 1000 + t, cfg.kmeans_iters, cfg.kmeans_max_points)
            res[:, d] -= book[nearest(res[:, d], book)]
            self.books.append(book)
        self.sizes = (n_classes,) + tuple(cfg.sizes[1:])

    def encode(self, x, labels0):
        res = (x - self.base.mean) @ self.base.proj - self.c0[labels0]
        codes = np.empty((len(x), L), np.int64)
        codes[:, 0] = labels0
        for t in range(1, L):
            d = self.base.dims[t]
            codes[:, t] = nearest(res[:, d], self.books[t - 1])
            res[:, d] -= self.books[t - 1][codes[:, t]]
        return codes

    def decode(self, codes, stages):
        lat = np.zeros((len(codes), self.base.proj.shape[1]), np.float32)
        if stages > 0:
            lat += self.c0[codes[:, 0]]
        for t in range(1, stages):
            lat[:, self.base.dims[t]] += self.books[t - 1][codes[:, t]]
        return lat @ self.base.proj.T + self.base.mean


class BaseCodec:
    def __init__(self, codec):
        self.c = codec
        self.sizes = tuple(codec.sizes)

    def encode(self, x, labels0=None):
        return self.c.encode_features(x)

    def decode(self, codes, stages):
        return self.c.decode_features(codes, stages)


class Res(nn.Module):
    def __init__(self, c, k=3):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(c, c, k, padding=k // 2), nn.Conv1d(c, c, 1)

    def forward(self, x):
        return x + self.conv2(F.gelu(self.conv1(F.gelu(x))))


class ConvAE(nn.Module):
    """log-mel [B, 80, 8F] -> latent [B, D, F] -> log-mel; receptive field a few frames each side."""

    def __init__(self, n_mels=80, C=128, D=64):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv1d(n_mels, C, 5, padding=2), nn.GELU(),
                                 *[m for _ in range(3) for m in (nn.Conv1d(C, C, 4, 2, 1), nn.GELU())],
                                 Res(C), Res(C), nn.Conv1d(C, D, 1))
        self.dec = nn.Sequential(nn.Conv1d(D, C, 3, padding=1), Res(C), Res(C),
                                 *[m for _ in range(3) for m in (nn.ConvTranspose1d(C, C, 4, 2, 1), nn.GELU())],
                                 nn.Conv1d(C, n_mels, 5, padding=2))


class EMARVQ:
    """Residual VQ, L levels of K codes of dim D; EMA codebooks, k-means init, dead-code restart; level 0 optionally
    assigned by given labels (semantic), its codeword the EMA mean of the latents of its class."""

    def __init__(self, K, D, semantic_classes=0, decay=0.99, dead=0.05, seed=0):
        self.K, self.D, self.sem, self.decay, self.dead = K, D, semantic_classes, decay, dead
        self.sizes = ((semantic_classes,) if semantic_classes else (K,)) + (K,) * (L - 1)
        self.books = [torch.zeros(k, D) for k in self.sizes]
        self.count = [torch.ones(k) for k in self.sizes]
        self.sums = [torch.zeros(k, D) for k in self.sizes]
        self.gen = torch.Generator().manual_seed(seed)
        self.restarts = [0] * L

    @torch.no_grad()
    def init(self, z, labels0=None, iters=10):
        from sklearn.cluster import KMeans
        res = z.clone()
        for l in range(L):
            if l == 0 and self.sem:
                idx = labels0
                book = torch.zeros(self.sizes[0], self.D).index_add_(0, idx, res)
                n = torch.bincount(idx, minlength=self.sizes[0]).float()
                book = book / n.clamp_min(1)[:, None]
            else:
                km = KMeans(self.sizes[l], n_init=1, max_iter=iters, random_state=l, init="k-means++").fit(res.numpy())
                book = torch.from_numpy(km.cluster_centers_.astype(np.float32))
                n = torch.full((self.sizes[l],), len(res) / self.sizes[l])
            self.books[l] = book
            self.count[l] = n.clone()
            self.sums[l] = book * n[:, None]
            res -= book[self.assign(l, res, labels0)]

    def assign(self, l, res, labels0):
        if l == 0 and self.sem:
            return labels0
        b = self.books[l]
        return torch.argmin((b * b).sum(1)[None] - 2 * res @ b.T, 1)

    def __call__(self, z, levels=L, labels0=None, update=False):
        """z [N, D] -> (quantised [N, D], codes [N, levels])."""
        res, q, codes = z.detach().clone(), torch.zeros_like(z), []
        for l in range(levels):
            idx = self.assign(l, res, labels0)
            if update:
                self._update(l, res, idx)
            v = self.books[l][idx]
            q = q + v
            res = res - v
            codes.append(idx)
        return q, torch.stack(codes, 1)

    @torch.no_grad()
    def _update(self, l, res, idx):
        k = self.sizes[l]
        n = torch.bincount(idx, minlength=k).float()
        s = torch.zeros(k, self.D).index_add_(0, idx, res)
        self.count[l].mul_(self.decay).add_(n, alpha=1 - self.decay)
        self.sums[l].mul_(self.decay).add_(s, alpha=1 - self.decay)
        seen = self.count[l] > 1e-6
        self.books[l][seen] = self.sums[l][seen] / self.count[l][seen, None]
        if l == 0 and self.sem:
            return
        dead = self.count[l] < self.dead * len(res) / k
        nd = int(dead.sum())
        if nd:
            pick = torch.randint(len(res), (nd,), generator=self.gen)
            self.books[l][dead] = res[pick]
            self.count[l][dead] = len(res) / k
            self.sums[l][dead] = res[pick] * (len(res) / k)
            self.restarts[l] += nd


class LearnedRVQ:
    """Train a ConvAE + EMARVQ on the train frames' log-mel (normalised per bin); encode / decode 640-d frames."""

    def __init__(self, train: Split, labels0=None, n_classes=0, steps=1500, batch=16, crop=32, K=256, C=128, D=64,
                 lr=2e-3, beta=0.25, dropout=0.5, seed=0, log=print):
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        mel = train.x.reshape(len(train.x), 8, 80)
        self.mu, self.sd = mel.reshape(-1, 80).mean(0), mel.reshape(-1, 80).std(0) + 1e-3
        xn = torch.from_numpy(((mel - self.mu) / self.sd).astype(np.float32))       # [N, 8, 80]
        lab = torch.from_numpy(labels0) if labels0 is not None else None
        self.ae, self.vq = ConvAE(C=C, D=D), EMARVQ(K, D, n_classes, seed=seed)
        self.sem = n_classes > 0
        with torch.no_grad():                                                         # k-means init on 8k frames
            pick = rng.choice(len(xn) - crop, 256, replace=False)
            zb = torch.cat([self._enc(xn[p:p + crop][None])[0] for p in pick])
            self.vq.init(zb, torch.cat([lab[p:p + crop] for p in pick]) if self.sem else None)
        opt = torch.optim.AdamW(self.ae.parameters(), lr=lr, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
        self.history, t0 = [], time.perf_counter()
        for step in range(steps):
            starts = rng.integers(0, len(xn) - crop, batch)
            xb = torch.stack([xn[s:s + crop] for s in starts])                        # [B, crop, 8, 80]
            lb = torch.stack([lab[s:s + crop] for s in starts]).reshape(-1) if self.sem else None
            z = self._enc(xb)                                                         # [B, crop, D]
            levels = int(rng.integers(1, L + 1)) if rng.random() < dropout else L
            q, _ = self.vq(z.reshape(-1, D), levels, lb, update=True)
            q = q.reshape(z.shape)
            zq = z + (q - z).detach()
            rec = self._dec(zq)
            loss_rec = F.mse_loss(rec, xb)
            loss = loss_rec + beta * F.mse_loss(z, q.detach())
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.ae.parameters(), 1.0)
            opt.step()
            sched.step()
            if step % 100 == 0 or step == steps - 1:
                self.history.append(dict(step=step, rec=round(loss_rec.item(), 4), levels=levels,
                                         s=round(time.perf_counter() - t0, 1)))
                log(f"    rvq step {step}: rec {loss_rec.item():.4f} (levels {levels}) {time.perf_counter() - t0:.0f} s")
        self.seconds = time.perf_counter() - t0
        self.sizes = self.vq.sizes
        self.ae.eval()

    def _enc(self, xb):                       # [B, F, 8, 80] -> [B, F, D]
        B, Fr = xb.shape[:2]
        return self.ae.enc(xb.reshape(B, Fr * 8, 80).transpose(1, 2)).transpose(1, 2)

    def _dec(self, z):                        # [B, F, D] -> [B, F, 8, 80]
        B, Fr = z.shape[:2]
        return self.ae.dec(z.transpose(1, 2)).transpose(1, 2).reshape(B, Fr, 8, 80)

    @torch.no_grad()
    def encode_split(self, split: Split, labels0=None):
        """Per utterance (no cross-utterance context): codes [N, 16] and the decoded 640-d frames for 1..16 levels."""
        codes, z_all = [], []
        off = 0
        for f in split.feats:
            x = torch.from_numpy(((f.reshape(len(f), 8, 80) - self.mu) / self.sd).astype(np.float32))[None]
            z = self._enc(x)[0]
            lb = torch.from_numpy(labels0[off:off + len(f)]) if self.sem else None
            _, c = self.vq(z, L, lb)
            codes.append(c.numpy())
            z_all.append(z)
            off += len(f)
        self._last = (split, z_all, np.concatenate(codes))
        return self._last[2]

    @torch.no_grad()
    def decode_split(self, split, codes, stages):
        out, off = [], 0
        for n in split.lengths:
            c = torch.from_numpy(codes[off:off + n])
            q = sum(self.vq.books[l][c[:, l]] for l in range(stages)) if stages else torch.zeros(n, self.vq.D)
            mel = self._dec(q[None])[0].numpy() * self.sd + self.mu
            out.append(mel.reshape(n, 640))
            off += n
        return np.concatenate(out)


# ------------------------------------------------------------------------------------------------ statistics
def entropy_bits(counts):
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def cond_plugin_bits(x, y, kx, ky):
    joint = np.bincount(x * ky + y, minlength=kx * ky).reshape(kx, ky).astype(np.float64)
    return entropy_bits(joint.ravel()) - entropy_bits(joint.sum(1))


def unigram(y, k, alpha=0.5):
    n = np.bincount(y, minlength=k).astype(np.float64) + alpha
    return n / n.sum()


def bigram_eval(xtr, ytr, dev_idx, xte, yte, kx, ky):
    """Interpolated bigram p(y|x) = (n(x,y) + beta u(y)) / (n(x) + beta): beta by dev CE (fit on train minus dev),
    evaluated on held out with counts of the whole train. Returns CE bits, top-1, top-5, beta."""
    def table(x, y):
        return np.bincount(x * ky + y, minlength=kx * ky).reshape(kx, ky).astype(np.float64)

    def probs(n, u, beta):
        return (n + beta * u[None]) / (n.sum(1, keepdims=True) + beta)

    fit = np.ones(len(ytr), bool)
    fit[dev_idx] = False
    u = unigram(ytr[fit], ky)
    n = table(xtr[fit], ytr[fit])
    best = min((-np.log2(probs(n, u, b)[xtr[dev_idx], ytr[dev_idx]]).mean(), b) for b in (0.1, 0.3, 1, 3, 10, 30, 100, 300))
    beta = best[1]
    p = probs(table(xtr, ytr), unigram(ytr, ky), beta)[xte]
    top = np.argsort(-p, 1)[:, :5]
    return float(-np.log2(p[np.arange(len(yte)), yte]).mean()), float((top[:, 0] == yte).mean()), \
        float((top == yte[:, None]).any(1).mean()), beta


class LevelMLP(nn.Module):
    """One small MLP per target level (batched): embeddings of the frame's codes c_j, j <= k - depth, optionally
    + context (previous frame's 16 codes, phoneme window, speaker, language) -> logits over level k's codes."""

    def __init__(self, sizes, depth, ctx, n_phon, n_spk, n_lang, levels, cur=True, prev=True, e=16, H=128):
        super().__init__()
        self.sizes, self.depth, self.ctx, self.levels, self.cur, self.prev_on = sizes, depth, ctx, levels, cur, prev
        self.cur_emb = nn.ModuleList([nn.Embedding(k, e) for k in sizes])
        n_in = L * e if cur else 0
        if ctx:
            self.prev_emb = nn.ModuleList([nn.Embedding(k + 1, e) for k in sizes]) if prev else None
            self.phon = nn.Embedding(n_phon + 2, e)
            self.spk, self.lang = nn.Embedding(n_spk, e), nn.Embedding(n_lang, e)
            n_in += (L * e if prev else 0) + len(WINDOW) * e + 2 * e
        nl, kmax = len(levels), max(sizes[k] for k in levels)
        self.W1 = nn.Parameter(torch.randn(nl, n_in, H) / math.sqrt(n_in))
        self.b1 = nn.Parameter(torch.zeros(nl, 1, H))
        self.W2 = nn.Parameter(torch.randn(nl, H, kmax) / math.sqrt(H))
        self.b2 = nn.Parameter(torch.zeros(nl, 1, kmax))
        mask = torch.tensor([[1.0 if j <= k - depth else 0.0 for j in range(L)] for k in levels])
        self.register_buffer("mask", mask)
        self.register_buffer("logit_mask", torch.tensor([[0.0 if i < sizes[k] else -1e9 for i in range(kmax)]
                                                         for k in levels]))

    def forward(self, b):
        parts = []
        B = len(b["spk"])
        if self.cur:
            cur = torch.stack([emb(b["codes"][:, j]) for j, emb in enumerate(self.cur_emb)], 1)   # [B, L, e]
            parts.append((cur[None] * self.mask[:, None, :, None]).reshape(len(self.levels), B, -1))
        if self.ctx:
            c = [self.phon(b["phon"]).reshape(B, -1), self.spk(b["spk"]), self.lang(b["lang"])]
            if self.prev_on:
                c.insert(0, torch.cat([emb(b["prev"][:, j]) for j, emb in enumerate(self.prev_emb)], 1))
            parts.append(torch.cat(c, 1)[None].expand(len(self.levels), B, -1))
        x = torch.cat(parts, 2)
        h = F.gelu(torch.baddbmm(self.b1, x, self.W1))
        return torch.baddbmm(self.b2, h, self.W2) + self.logit_mask[:, None]                    # [nl, B, kmax]


def mlp_eval(sizes, tr, te, dev_mask, depth, ctx, n_phon, n_spk, n_lang, levels=tuple(range(L)), cur=True,
             prev=True, epochs=5, batch=512, lr=3e-3, seed=0):
    """Train on the train frames minus dev; per level keep the epoch of the lowest dev CE; report held-out CE (bits),
    top-1, top-5 at that epoch."""
    torch.manual_seed(seed)
    model = LevelMLP(sizes, depth, ctx, n_phon, n_spk, n_lang, list(levels), cur, prev)
    with torch.no_grad():                                   # start from the train marginal of each level
        for j, k in enumerate(levels):
            model.b2[j, 0, :sizes[k]] = torch.from_numpy(np.log(unigram(tr["codes"][:, k].numpy(), sizes[k]))).float()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    fit = {k: v[~dev_mask] for k, v in tr.items()}
    dev = {k: v[dev_mask] for k, v in tr.items()}
    lv = torch.tensor(list(levels))
    n = len(fit["spk"])
    steps = epochs * math.ceil(n / batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def evaluate(d):
        model.eval()
        ce, t1, t5 = torch.zeros(len(lv)), torch.zeros(len(lv)), torch.zeros(len(lv))
        for s in range(0, len(d["spk"]), 4096):
            b = {k: v[s:s + 4096] for k, v in d.items()}
            logits = model(b).log_softmax(-1)
            y = b["codes"][:, lv].T                                                          # [nl, B]
            ce += -logits.gather(2, y[..., None])[..., 0].sum(1)
            top = logits.topk(5, -1).indices
            t1 += (top[..., 0] == y).sum(1)
            t5 += (top == y[..., None]).any(-1).sum(1)
        model.train()
        m = len(d["spk"])
        return (ce / m / LN2).numpy(), (t1 / m).numpy(), (t5 / m).numpy()

    best = [None] * len(lv)
    for ep in range(epochs):
        order = torch.randperm(n, generator=gen)
        for s in range(0, n, batch):
            i = order[s:s + batch]
            b = {k: v[i] for k, v in fit.items()}
            logits = model(b)
            y = b["codes"][:, lv].T
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        dce = evaluate(dev)[0]
        tce, t1, t5 = evaluate(te)
        for j in range(len(lv)):
            if best[j] is None or dce[j] < best[j]["dev_ce"]:
                best[j] = dict(dev_ce=float(dce[j]), ce=float(tce[j]), top1=float(t1[j]), top5=float(t5[j]), epoch=ep)
    return {int(k): best[j] for j, k in enumerate(levels)}


def tensors(split: Split, codes, sizes):
    return dict(codes=torch.from_numpy(codes), prev=torch.from_numpy(split.prev(codes, sizes)),
                phon=torch.from_numpy(split.phon), spk=torch.from_numpy(split.spk), lang=torch.from_numpy(split.lang))


def recon(decode, x, variance, stages=(1, 2, 4, 8, 16)):
    return {s: float(((x - decode(s)) ** 2).mean() / variance) for s in stages}


def level_stats(name, sizes, tr_split, te_split, ctr, cte, dev_mask, dims, args, log):
    """Every per-level statistic of one codec."""
    t0 = time.perf_counter()
    out = dict(sizes=list(sizes), levels={})
    ptr, pte = tr_split.prev(ctr, sizes), te_split.prev(cte, sizes)
    dev_idx = np.flatnonzero(dev_mask)
    for k in range(L):
        K = sizes[k]
        ytr, yte = ctr[:, k], cte[:, k]
        u = unigram(ytr, K)
        utop = np.argsort(-u)[:5]
        h = entropy_bits(np.bincount(ytr, minlength=K).astype(float))
        ce_b, t1_b, t5_b, beta = bigram_eval(ptr[:, k], ytr, dev_idx, pte[:, k], yte, K + 1, K)
        out["levels"][k] = dict(
            K=K, used=int((np.bincount(ytr, minlength=K) > 0).sum()), usage=h / math.log2(K), H_train=h,
            H_heldout=float(-np.log2(u[yte]).mean()), top1_marginal=float((yte == utop[0]).mean()),
            top5_marginal=float(np.isin(yte, utop).mean()),
            H_prev_plugin=cond_plugin_bits(ptr[:, k], ytr, K + 1, K),
            H_prev_heldout=ce_b, top1_prev=t1_b, top5_prev=t5_b, prev_beta=beta)
    tr, te = tensors(tr_split, ctr, sizes), tensors(te_split, cte, sizes)
    for key, depth, ctx in (("S1", 1, False), ("S2", 2, False), ("F1", 1, True), ("F2", 2, True)):
        if key not in args.predictors:
            continue
        t1 = time.perf_counter()
        levels = tuple(k for k in range(L) if k - depth >= 0 or ctx)
        res = mlp_eval(sizes, tr, te, dev_mask, depth, ctx, *dims, levels=levels, epochs=args.epochs, seed=args.seed)
        for k, r in res.items():
            out["levels"][k].update({f"{key}_{m}": v for m, v in r.items()})
        log(f"  {name} {key}: {time.perf_counter() - t1:.0f} s")
    t1 = time.perf_counter()
    txt = mlp_eval(sizes, tr, te, dev_mask, 1, True, *dims, levels=(0,), cur=False, prev=False, epochs=args.epochs,
                   seed=args.seed)[0]
    out["c0_text"] = dict(txt, ce_nats=txt["ce"] * LN2)
    log(f"  {name} c0 text: {time.perf_counter() - t1:.0f} s")
    out["stats_s"] = round(time.perf_counter() - t0, 1)
    return out


# ------------------------------------------------------------------------------------------------ main
def semantic_asr_labels(cfg, speech, cache_dir, train, test, k, seed, log):
    """k-means (k) of the phoneme recogniser's last hidden layer averaged over each 80 ms frame (2 of its 40 ms steps)."""
    from helpers.backends.mini.phoneme_asr import recogniser, features
    from sklearn.cluster import KMeans
    rec, hist = recogniser(cfg.recogniser, speech, cache_dir, log)
    model = rec.model.eval()
    grab = {}
    hook = model.out.register_forward_hook(lambda m, i, o: grab.__setitem__("h", i[0]))

    def frames(split):
        out = []
        with torch.no_grad():
            for a, n in zip(split.audio, split.lengths):
                x = features(a, cfg.recogniser.n_mels)[None]
                model(x, torch.tensor([len(x[0])]))
                h = grab["h"][0]                                                    # [T/4, hidden]
                h = torch.cat([h, h[-1:].expand(2 * n - len(h), -1)]) if len(h) < 2 * n else h[:2 * n]
                out.append(h.reshape(n, 2, -1).mean(1).numpy())
        return np.concatenate(out)

    htr, hte = frames(train), frames(test)
    hook.remove()
    mu, sd = htr.mean(0), htr.std(0) + 1e-6
    km = KMeans(k, n_init=1, max_iter=20, random_state=seed, init="k-means++").fit((htr - mu) / sd)
    return km.labels_.astype(np.int64), km.predict((hte - mu) / sd).astype(np.int64), \
        dict(recogniser_val_per=hist.get("val_per", [None])[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache-dir", default="outputs/cache/mini", help="the miniature's build cache (speech, codec)")
    ap.add_argument("--out", required=True, help="JSON results")
    ap.add_argument("--codecs", default="a,b_phone,b_asr,c,d")
    ap.add_argument("--predictors", default="S1,S2,F1,F2")
    ap.add_argument("--train-per-lang", type=int, default=0, help="pretrain clips per language (0: all)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs of each predictor MLP")
    ap.add_argument("--rvq-steps", type=int, default=3000)
    ap.add_argument("--rvq-size", type=int, default=256)
    ap.add_argument("--dev-frac", type=float, default=0.05, help="train utterances held for epoch / beta selection")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    args.codecs, args.predictors = args.codecs.split(","), [p for p in args.predictors.split(",") if p]
    torch.set_num_threads(1)
    t_all = time.perf_counter()

    def log(s):
        print(f"[{time.perf_counter() - t_all:6.0f} s] {s}", flush=True)

    cfg, speech, codec, data = build_data(args.cache_dir, log)
    rows = data["pretrain"]["rows"]
    keep = None
    if args.train_per_lang:
        seen = {}
        keep = [i for i, r in enumerate(rows) if seen.setdefault(r["lang"], []).append(i) or
                len(seen[r["lang"]]) <= args.train_per_lang]
    symbols = sorted({p for r in rows for p in r["phonemes"]})
    vocab = {p: i for i, p in enumerate(symbols)}
    speakers = {s: i for i, s in enumerate(sorted({r["speaker"] for r in rows}))}
    langs = {s: i for i, s in enumerate(sorted({r["lang"] for r in rows}))}
    train = Split(data["pretrain"], vocab, speakers, langs, keep)
    test = Split(data["pretrain_val"], vocab, speakers, langs)
    rng = np.random.default_rng(args.seed)
    dev_utts = rng.choice(len(train.feats), max(1, int(args.dev_frac * len(train.feats))), replace=False)
    dev_mask = np.isin(train.utt, dev_utts)
    dims = (len(vocab), len(speakers), len(langs))
    variance = float(((train.x - train.x.mean(0)) ** 2).mean())
    log(f"data: {len(train.x)} train frames ({len(train.feats)} clips, {int(dev_mask.sum())} dev), "
        f"{len(test.x)} held-out frames ({len(test.feats)} clips), {len(vocab)} phonemes")
    results = dict(args=vars(args), frames=dict(train=len(train.x), dev=int(dev_mask.sum()), heldout=len(test.x)),
                   phonemes=len(vocab), codecs={})
    asr = None
    for name in args.codecs:
        t0 = time.perf_counter()
        log(f"codec {name}")
        extra = {}
        if name == "a":
            c = BaseCodec(codec)
            ctr, cte = c.encode(train.x), c.encode(test.x)
            rec = recon(lambda s: c.decode(cte, s), test.x, variance)
        elif name in ("b_phone", "b_asr"):
            if name == "b_phone":
                ltr, lte, n = train.phone_id, test.phone_id, len(vocab) + 1
            else:
                if asr is None:
                    asr = semantic_asr_labels(cfg, speech, args.cache_dir, train, test, args.rvq_size, args.seed, log)
                ltr, lte, n = asr[0], asr[1], args.rvq_size
                extra.update(asr[2])
            c = SemanticGroupCodec(codec, train.x, ltr, n, codec.config.kmeans_iters, args.seed)
            ctr, cte = c.encode(train.x, ltr), c.encode(test.x, lte)
            rec = recon(lambda s: c.decode(cte, s), test.x, variance)
        elif name in ("c", "d"):
            if name == "d":
                if asr is None:
                    asr = semantic_asr_labels(cfg, speech, args.cache_dir, train, test, args.rvq_size, args.seed, log)
                ltr, lte, n = asr[0], asr[1], args.rvq_size
            else:
                ltr = lte = None
                n = 0
            c = LearnedRVQ(train, ltr, n, steps=args.rvq_steps, K=args.rvq_size, seed=args.seed, log=log)
            ctr, cte = c.encode_split(train, ltr), c.encode_split(test, lte)
            rec = recon(lambda s: c.decode_split(test, cte, s), test.x, variance)
            extra.update(train_s=round(c.seconds, 1), history=c.history, restarts=c.vq.restarts,
                         params=sum(p.numel() for p in c.ae.parameters()))
        else:
            raise SystemExit(f"unknown codec {name}")
        sizes = tuple(int(s) for s in c.sizes)
        log(f"  {name}: codes ready, rel. error 1/2/4/8/16 levels "
            + " / ".join(f"{v:.3f}" for v in rec.values()))
        res = level_stats(name, sizes, train, test, ctr, cte, dev_mask, dims, args, log)
        res.update(recon=rec, seconds=round(time.perf_counter() - t0, 1), **extra)
        results["codecs"][name] = res
        print_table(name, res)
        results["seconds"] = round(time.perf_counter() - t_all, 1)
        Path(args.out).write_text(json.dumps(results, indent=1))
    log(f"done: {args.out}")
    return results


def print_table(name, res):
    cols = ("K", "usage", "H_heldout", "H_prev_heldout", "S1_ce", "F1_ce", "top1_marginal", "top1_prev", "S1_top1",
            "S1_top5", "S2_top1", "F1_top1", "F1_top5", "F2_top1")
    print(f"\n{name}: recon " + " ".join(f"{k}:{v:.3f}" for k, v in res["recon"].items())
          + f"; c0 from text: {res['c0_text']['ce_nats']:.2f} nats, top-1 {res['c0_text']['top1']:.2f}")
    print("lvl " + " ".join(f"{c[:13]:>13}" for c in cols))
    for k, r in res["levels"].items():
        print(f"{k:>3} " + " ".join(f"{r.get(c, float('nan')):>13.3f}" if c != "K" else f"{r[c]:>13d}" for c in cols))
    print(flush=True)


if __name__ == "__main__":
    main()
