"""The miniature's speech codec: 16 codebooks at 12.5 frames/s (80 ms per frame), fitted by k-means.

audio (16 kHz) -> log-mel [8T, 80] (10 ms hop) -> one 640-d vector per 80 ms frame (8 hops stacked)
-> minus the mean -> the top `pca_dim` principal components (variance order) -> 16 stages:

- stage 0 (`c0`, the talker's code) is *semantic*, as on the real tokenizer (`c0="phoneme"`, the default): the
  phoneme sounding at the frame (espeak's alignment, the miniature's in-domain phonetic labels), its codeword that
  phoneme's mean over all components; so the talker's c0 is nearly a function of the text. With `c0="kmeans"` it
  is an acoustic cluster of all components (`sizes[0]` codes), the miniature's first design;
- stage t >= 1 quantises what is left of PCA group t (the components split into 15 contiguous groups
  in variance order) with `sizes[t]` codes (`design="group"`, the default), or, with `design="residual"`,
  what is left of all components (a plain RVQ of one latent, as neural codecs do).

Each stage codes a residual, so the error falls as stages are added; because stage t always refines
the same slowly varying components, a deep code is related to the same code of the previous frame
(a plain RVQ over all components makes deep codes close to noise: see docs/miniature.md).
With the semantic c0 the residual stages code what the phoneme leaves: the speaker, the prosody, where in the
phoneme the frame lies. That makes a deep code predictable from the shallower codes of its frame
(docs/miniature-tokenizer-probe.md measures it level by level).
decode: codewords summed -> inverse PCA -> mel -> linear spectrogram (pseudo-inverse) -> Griffin-Lim.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
import torch

from helpers.artifacts import load_tensors, save_json, save_tensors

SAMPLE_RATE = 16000
HOP = 160                 # 10 ms
N_FFT = 1024
STACK = 8                 # hops per codec frame: 80 ms, 12.5 frames/s
NUM_CODEBOOKS = 16
LOG_FLOOR = 1e-3
DEFAULT_SIZES = (256, 64, 64, 32, 32, 32) + (16,) * 10
DESIGNS = ("group", "residual")
C0_KINDS = ("phoneme", "kmeans")


@dataclass(frozen=True)
class CodecConfig:
    n_mels: int = 80
    pca_dim: int = 48
    sizes: tuple[int, ...] = DEFAULT_SIZES
    kmeans_iters: int = 12
    kmeans_max_points: int = 30000
    seed: int = 0
    design: str = "group"        # "group": stage t >= 1 refines PCA group t; "residual": every stage the whole residual
    c0: str = "phoneme"          # "phoneme": the frame's phoneme (sizes[0] bounds the symbols); "kmeans": acoustic

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {self.design!r}")
        if self.c0 not in C0_KINDS:
            raise ValueError(f"c0 must be one of {', '.join(C0_KINDS)}, got {self.c0!r}")
        if len(self.sizes) != NUM_CODEBOOKS or min(self.sizes) < 2:
            raise ValueError(f"sizes must list {NUM_CODEBOOKS} codebook sizes >= 2, got {self.sizes}")
        if not NUM_CODEBOOKS - 1 <= self.pca_dim <= STACK * self.n_mels:
            raise ValueError(f"pca_dim must be in {NUM_CODEBOOKS - 1}..{STACK * self.n_mels}, got {self.pca_dim}")


@lru_cache(maxsize=4)
def _mel_basis(n_mels: int) -> torch.Tensor:
    import librosa
    return torch.from_numpy(librosa.filters.mel(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=n_mels, norm=None))


def log_mel(audio: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """audio [N] at 16 kHz -> log-mel [1 + N // 160, n_mels]."""
    x = torch.as_tensor(np.asarray(audio, np.float32))
    spec = torch.stft(x, N_FFT, HOP, window=torch.hann_window(N_FFT), center=True, return_complex=True).abs()
    return (_mel_basis(n_mels) @ spec).clamp_min(LOG_FLOOR).log().T.numpy()


def frame_features(audio: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """audio [N] at 16 kHz -> one vector per 80 ms frame [ceil((1 + N // 160) / 8), 8 * n_mels] (tail padded)."""
    mel = log_mel(audio, n_mels)
    frames = -(-len(mel) // STACK)
    mel = np.concatenate((mel, np.repeat(mel[-1:], frames * STACK - len(mel), 0)))
    return mel.reshape(frames, STACK * n_mels)


def _nearest(x: np.ndarray, book: np.ndarray) -> np.ndarray:
    """Index of the nearest codeword. x [N, d], book [K, d] -> [N]."""
    return np.argmin((book * book).sum(1)[None] - 2.0 * x @ book.T, axis=1)


def _kmeans(x: np.ndarray, k: int, seed: int, iters: int, max_points: int) -> np.ndarray:
    from sklearn.cluster import KMeans
    rng = np.random.default_rng(seed)
    if len(x) > max_points:
        x = x[np.sort(rng.choice(len(x), max_points, replace=False))]
    km = KMeans(n_clusters=k, n_init=1, max_iter=iters, tol=1e-5, random_state=seed, init="k-means++").fit(x)
    return km.cluster_centers_.astype(np.float32)


@dataclass
class RVQCodec:
    config: CodecConfig
    mean: np.ndarray                       # [640]
    proj: np.ndarray                       # [640, pca_dim] orthonormal columns
    codebooks: list[np.ndarray]            # 16 x [K_t, |dims_t|]
    dims: list[np.ndarray]                 # 16 x component indices
    variance: float                        # mean variance per feature of the fitting frames
    symbols: list[str] | None = None       # c0="phoneme": the phoneme of each c0 code
    _inverse_mel: np.ndarray | None = field(default=None, repr=False)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(b) for b in self.codebooks)

    def features(self, audio: np.ndarray) -> np.ndarray:
        return frame_features(audio, self.config.n_mels)

    def semantic_codes(self, phonemes: list[str] | None, frames: int) -> np.ndarray | None:
        """c0 [T] of a semantic codec from the frame phonemes (None for an acoustic c0, which needs none)."""
        if self.symbols is None:
            return None
        if phonemes is None or len(phonemes) != frames:
            raise ValueError(f"this codec's c0 is the frame's phoneme: pass one phoneme per frame ({frames}), got "
                             f"{'none' if phonemes is None else len(phonemes)}")
        index = {s: i for i, s in enumerate(self.symbols)}
        unknown = sorted({p for p in phonemes if p not in index})
        if unknown:
            raise ValueError(f"phonemes outside the codec's c0 symbols: {unknown[:10]}")
        return np.array([index[p] for p in phonemes], np.int64)

    def encode_features(self, feats: np.ndarray, phonemes: list[str] | None = None) -> np.ndarray:
        """[T, 640] (and, for a semantic c0, the T frame phonemes) -> codes [T, 16] (int64)."""
        residual = (np.asarray(feats, np.float32) - self.mean) @ self.proj
        codes = np.empty((len(residual), NUM_CODEBOOKS), np.int64)
        c0 = self.semantic_codes(phonemes, len(residual))
        for t, (book, d) in enumerate(zip(self.codebooks, self.dims)):
            codes[:, t] = c0 if t == 0 and c0 is not None else _nearest(residual[:, d], book)
            residual[:, d] -= book[codes[:, t]]
        return codes

    def encode(self, audio: np.ndarray, phonemes: list[str] | None = None) -> np.ndarray:
        """audio [N] at 16 kHz (and its frame phonemes, for a semantic c0) -> codes [T, 16], one row per 80 ms."""
        return self.encode_features(self.features(audio), phonemes)

    def decode_features(self, codes: np.ndarray, stages: int = NUM_CODEBOOKS) -> np.ndarray:
        """codes [T, 16] -> frame vectors [T, 640] from the first `stages` codebooks.

        The model's vocabulary is the largest codebook's size; a code beyond its own (smaller) codebook
        can be sampled by a model but never comes out of `encode`: it contributes nothing.
        """
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != NUM_CODEBOOKS:
            raise ValueError(f"codes must be [T, {NUM_CODEBOOKS}], got {codes.shape}")
        if not 0 <= stages <= NUM_CODEBOOKS:
            raise ValueError(f"stages must be in 0..{NUM_CODEBOOKS}, got {stages}")
        if codes.size and codes.min() < 0:
            raise ValueError(f"codes must be >= 0, got {codes.min()}")
        latent = np.zeros((len(codes), self.proj.shape[1]), np.float32)
        for t in range(stages):
            col = codes[:, t]
            valid = col < self.sizes[t]
            latent[np.ix_(valid, self.dims[t])] += self.codebooks[t][col[valid]]
        return latent @ self.proj.T + self.mean

    def decode(self, codes: np.ndarray, stages: int = NUM_CODEBOOKS, iters: int = 32, seed: int = 0) -> np.ndarray:
        """codes [T, 16] -> audio [T * 1280] at 16 kHz (Griffin-Lim phase)."""
        import librosa
        mel = np.exp(self.decode_features(codes, stages).reshape(-1, self.config.n_mels).T)
        mel[mel <= LOG_FLOOR * 1.01] = 0.0
        if self._inverse_mel is None:
            self._inverse_mel = np.linalg.pinv(_mel_basis(self.config.n_mels).numpy())
        spec = np.maximum(self._inverse_mel @ mel, 0.0)
        return librosa.griffinlim(spec, n_iter=iters, hop_length=HOP, n_fft=N_FFT, random_state=seed,
                                  init="random").astype(np.float32)

    def stage_errors(self, feats: np.ndarray, phonemes: list[str] | None = None) -> list[float]:
        """Relative log-mel error (MSE / feature variance) using the first k codebooks, k = 0..16."""
        codes = self.encode_features(feats, phonemes)
        return [float(((feats - self.decode_features(codes, k)) ** 2).mean() / self.variance)
                for k in range(NUM_CODEBOOKS + 1)]

    def save(self, path) -> None:
        tensors = {"mean": self.mean, "proj": self.proj, "variance": np.array([self.variance], np.float64)}
        for t in range(NUM_CODEBOOKS):
            tensors[f"codebook.{t}"], tensors[f"dims.{t}"] = self.codebooks[t], self.dims[t]
        save_tensors(path, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()})
        save_json(str(path) + ".json", dict(config=asdict(self.config), symbols=self.symbols))

    @classmethod
    def load(cls, path) -> "RVQCodec":
        t = {k: v.numpy() for k, v in load_tensors(path).items()}
        meta = json.loads(open(str(path) + ".json").read())
        config = CodecConfig(**meta["config"])
        return cls(config, t["mean"], t["proj"], [t[f"codebook.{i}"] for i in range(NUM_CODEBOOKS)],
                   [t[f"dims.{i}"] for i in range(NUM_CODEBOOKS)], float(t["variance"][0]), meta["symbols"])


def _phoneme_book(latent: np.ndarray, ids: np.ndarray, size: int) -> np.ndarray:
    """Each symbol's mean latent [size, d] over its frames (ids [N]); zero, the mean frame, for a symbol unseen."""
    sums = np.zeros((size, latent.shape[1]), np.float64)
    np.add.at(sums, ids, latent)
    counts = np.bincount(ids, minlength=size)[:, None]
    return (sums / np.maximum(counts, 1)).astype(np.float32)


def fit_codec(features: list[np.ndarray], config: CodecConfig = CodecConfig(),
              phonemes: list[list[str]] | None = None, symbols: list[str] | None = None) -> RVQCodec:
    """Fit on frame vectors of many utterances (each [T_i, 640]); deterministic for a seed and thread count.

    A semantic c0 (`config.c0 == "phoneme"`) needs each utterance's frame phonemes (T_i symbols) and takes its c0
    symbols from `symbols` (default: those phonemes, sorted), at most `config.sizes[0]` of them."""
    x = np.concatenate(features).astype(np.float32)
    if len(x) < max(config.sizes[1:]):
        raise ValueError(f"{len(x)} frames cannot fit a codebook of {max(config.sizes[1:])} codes")
    if config.c0 == "phoneme":
        if phonemes is None or [len(p) for p in phonemes] != [len(f) for f in features]:
            raise ValueError("a phoneme c0 needs one phoneme per frame of every utterance (phonemes=...)")
        flat = [p for utt in phonemes for p in utt]
        symbols = sorted(set(flat)) if symbols is None else list(symbols)
        if not set(flat) <= set(symbols) or len(symbols) > config.sizes[0]:
            raise ValueError(f"the c0 symbols must cover the phonemes and number at most sizes[0]={config.sizes[0]}, "
                             f"got {len(symbols)} symbols, {len(set(flat) - set(symbols))} phonemes outside them")
    elif len(x) < config.sizes[0]:
        raise ValueError(f"{len(x)} frames cannot fit a codebook of {config.sizes[0]} codes")
    mean = x.mean(0)
    centred = x - mean
    variance = float((centred ** 2).mean())
    rng = np.random.default_rng(config.seed)
    sample = centred if len(x) <= 100_000 else centred[rng.choice(len(x), 100_000, replace=False)]
    _, vectors = np.linalg.eigh((sample.T.astype(np.float64) @ sample) / len(sample))
    proj = vectors[:, ::-1][:, :config.pca_dim]
    proj = (proj * np.sign(proj[np.abs(proj).argmax(0), np.arange(config.pca_dim)])).astype(np.float32)
    residual = centred @ proj
    edges = np.linspace(0, config.pca_dim, NUM_CODEBOOKS).round().astype(int)
    dims = [np.arange(config.pca_dim)] + ([np.arange(edges[i], edges[i + 1]) for i in range(NUM_CODEBOOKS - 1)]
                                          if config.design == "group" else [np.arange(config.pca_dim)] * 15)
    books = []
    for t, d in enumerate(dims):
        if t == 0 and config.c0 == "phoneme":
            index = {s: i for i, s in enumerate(symbols)}
            ids = np.array([index[p] for p in flat])
            book = _phoneme_book(residual, ids, len(symbols))
            residual -= book[ids]
        else:
            book = _kmeans(residual[:, d], config.sizes[t], config.seed * 1000 + t, config.kmeans_iters,
                           config.kmeans_max_points)
            residual[:, d] -= book[_nearest(residual[:, d], book)]
        books.append(book)
    return RVQCodec(config, mean.astype(np.float32), proj, books, dims, variance,
                    symbols if config.c0 == "phoneme" else None)
