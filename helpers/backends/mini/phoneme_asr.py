"""An in-domain phoneme recogniser for the miniature: a small CTC model over log-mel frames, and the phoneme error rate.

Trained once on the espeak ground-truth speech of the pretrain role (all six languages), cached as a build step
keyed by its config and the speech step, so every language gets a quality metric offline:

    rec = recogniser(cfg, speech_folder, cache_dir)          # trained or loaded: PhonemeRecogniser
    hyps = rec.recognise([audio, ...])                       # audio [N] at 16 kHz -> phoneme tokens per clip
    per = phoneme_error_rate([reference_tokens(item.phonemes), ...], hyps)

audio -> log-mel [T, 80] (10 ms hop, the codec's `log_mel`) -> per-utterance mean and variance per bin ->
two stride-2 convolutions (40 ms steps) -> `layers` residual dilated convolutions (about 0.6 s of context each
side) -> logits [T / 4, vocabulary + 1] (index 0 the CTC blank); greedy CTC decoding. Padded steps are zeroed
after every layer, so a clip's result does not depend on the batch it is in.

The references are the items' frame-aligned phonemes (one per 80 ms codec frame) with silence `_` dropped and
runs collapsed: the phoneme sequence the miniature speaks.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from helpers.adapter.global_rng import global_rng
from helpers.artifacts import (cached_step, load_json, load_tensors, note, save_json, save_tensors, step_folder,
                               step_ready)
from helpers.method.checks import positive_int
from helpers.backends.mini.codec import log_mel
from helpers.backends.mini.speech import speech_key

SILENCE = "_"                       # espeak pauses: "_", "_:", "_!" ...
DILATIONS = (1, 2, 4, 1)           # of the residual convolutions, in turn


@dataclass(frozen=True)
class RecogniserConfig:
    n_mels: int = 80
    hidden: int = 96
    layers: int = 4                 # residual (dilated) convolutions after the front end
    epochs: int = 6
    lr: float = 3e-3
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self):
        for name in ("n_mels", "hidden", "epochs", "batch_size"):
            positive_int(name, getattr(self, name))
        if self.hidden % 2 or self.layers < 0 or not self.lr > 0:
            raise ValueError(f"hidden must be even, layers >= 0 and lr > 0; got hidden={self.hidden}, "
                             f"layers={self.layers}, lr={self.lr}")


def reference_tokens(frame_phonemes: list[str]) -> list[str]:
    """Frame-aligned phonemes (one per codec frame) -> the spoken phoneme sequence: silence dropped, runs collapsed."""
    out: list[str] = []
    previous = None
    for p in frame_phonemes:
        if p != previous and not p.startswith(SILENCE):
            out.append(p)
        previous = p
    return out


def features(audio: np.ndarray, n_mels: int) -> torch.Tensor:
    """audio [N] at 16 kHz -> normalised log-mel [1 + N // 160, n_mels] (per-utterance mean and std per bin)."""
    mel = torch.from_numpy(log_mel(audio, n_mels))
    return (mel - mel.mean(0)) / (mel.std(0, unbiased=False) + 1e-3)


class CTCModel(nn.Module):
    """log-mel [B, T, n_mels] with lengths [B] -> log-probabilities [B, T', vocab + 1] with lengths T' [B]."""

    def __init__(self, n_mels: int, vocab: int, hidden: int, layers: int):
        super().__init__()
        self.front = nn.ModuleList([nn.Conv1d(n_mels, hidden, 5, 2, 2), nn.Conv1d(hidden, hidden, 5, 2, 2)])
        dilations = [DILATIONS[i % len(DILATIONS)] for i in range(layers)]
        self.body = nn.ModuleList([nn.Conv1d(hidden, hidden, 5, 1, 2 * d, d) for d in dilations])
        self.norms = nn.ModuleList([nn.LayerNorm(hidden) for _ in dilations])
        self.out = nn.Linear(hidden, vocab + 1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, n = x.transpose(1, 2), lengths
        for conv in self.front:
            n = (n - 1) // 2 + 1                      # stride 2, kernel 5, padding 2
            h = nn.functional.gelu(conv(h))
            h = h * _mask(n, h)
        for conv, norm in zip(self.body, self.norms):
            h = h + nn.functional.gelu(conv(norm(h.transpose(1, 2)).transpose(1, 2) * _mask(n, h))) * _mask(n, h)
        return self.out(h.transpose(1, 2)).log_softmax(-1), n


def _mask(lengths: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """[B, 1, T] with 1 on each row's first `lengths` steps of h [B, C, T]."""
    return (torch.arange(h.shape[-1], device=h.device)[None] < lengths[:, None].to(h.device)).to(h.dtype)[:, None]


def _batch(feats: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(f) for f in feats], device=feats[0].device)
    return nn.utils.rnn.pad_sequence(feats, batch_first=True), lengths


@dataclass
class PhonemeRecogniser:
    """A trained CTC model and its vocabulary (symbols[i] is output i + 1; 0 is the blank)."""

    model: CTCModel
    symbols: list[str]
    config: RecogniserConfig

    @torch.no_grad()
    def recognise(self, audio: list[np.ndarray], batch_size: int = 16) -> list[list[str]]:
        """Greedy CTC transcripts (phoneme tokens) of mono float audio clips at 16 kHz."""
        if any(np.asarray(a).ndim != 1 or len(a) == 0 for a in audio):
            raise ValueError("every clip must be non-empty mono audio (1-D) at 16 kHz")
        self.model.eval()
        out = []
        for start in range(0, len(audio), batch_size):
            x, lengths = _batch([features(a, self.config.n_mels) for a in audio[start:start + batch_size]])
            logp, steps = self.model(x, lengths)
            for best, n in zip(logp.argmax(-1), steps.tolist()):
                ids = torch.unique_consecutive(best[:n]).tolist()
                out.append([self.symbols[i - 1] for i in ids if i])
        return out


def phoneme_error_rate(refs: list[list[str]], hyps: list[list[str]]) -> float:
    """Corpus PER: total edits (substitutions, deletions, insertions) over total reference phonemes."""
    import jiwer

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    if not refs or any(not r for r in refs):
        raise ValueError("every reference must hold at least one phoneme")
    return float(jiwer.wer([" ".join(r) for r in refs], [" ".join(h) for h in hyps]))


def train_recogniser(audio: list[np.ndarray], phonemes: list[list[str]], cfg: RecogniserConfig,
                     val_audio: list[np.ndarray] = (), val_phonemes: list[list[str]] = ()) -> tuple[PhonemeRecogniser, dict]:
    """CTC training (AdamW, one-cycle) on clips and their phoneme tokens; history: loss per epoch (mean over
    batches), validation PER per epoch (if validation clips are given), wall and CPU seconds, threads."""
    if len(audio) != len(phonemes) or not audio:
        raise ValueError(f"need as many phoneme sequences as clips (>= 1), got {len(audio)} and {len(phonemes)}")
    start, cpu = time.perf_counter(), time.process_time()
    symbols = sorted({p for seq in phonemes for p in seq})
    index = {p: i + 1 for i, p in enumerate(symbols)}
    feats = [features(a, cfg.n_mels) for a in audio]
    targets = [torch.tensor([index[p] for p in seq], device=feats[0].device) for seq in phonemes]
    with global_rng(cfg.seed):               # the layers' init draws from the global RNG
        model = CTCModel(cfg.n_mels, len(symbols), cfg.hidden, cfg.layers)
    rec = PhonemeRecogniser(model, symbols, cfg)
    batches = math.ceil(len(feats) / cfg.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, cfg.lr, total_steps=cfg.epochs * batches, pct_start=0.2)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    gen = torch.Generator().manual_seed(cfg.seed)
    history = {"loss": [], "val_per": []}
    for _ in range(cfg.epochs):
        model.train()
        order = torch.randperm(len(feats), generator=gen).tolist()
        total = 0.0
        for b in range(batches):
            idx = order[b * cfg.batch_size:(b + 1) * cfg.batch_size]
            x, lengths = _batch([feats[i] for i in idx])
            logp, steps = model(x, lengths)
            y = [targets[i] for i in idx]
            loss = ctc(logp.transpose(0, 1), torch.cat(y), steps, torch.tensor([len(t) for t in y], device=x.device))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item()
        history["loss"].append(total / batches)
        if len(val_audio):
            history["val_per"].append(phoneme_error_rate(list(val_phonemes), rec.recognise(list(val_audio))))
    history.update(seconds=round(time.perf_counter() - start, 1), cpu_seconds=round(time.process_time() - cpu, 1),
                   threads=torch.get_num_threads(),
                   clips=len(audio), parameters=sum(p.numel() for p in model.parameters()))
    return rec, history


def _train_step(cfg: RecogniserConfig, speech: Path, folder: Path) -> None:
    manifest = load_json(speech / "manifest.json")
    t = load_tensors(speech / "audio.safetensors")

    def role(name):
        audio, offsets = t[f"{name}.audio"].numpy(), t[f"{name}.offsets"].tolist()
        clips = [audio[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        return clips, [reference_tokens(r["phonemes"]) for r in manifest[name]]

    rec, history = train_recogniser(*role("pretrain"), cfg, *role("pretrain_val"))
    save_tensors(folder / "recogniser.safetensors", rec.model.state_dict())
    save_json(folder / "symbols.json", rec.symbols)
    save_json(folder / "history.json", history)


def _step_params(cfg: RecogniserConfig, speech: Path) -> dict:
    return dict(speech=speech.name, audio=speech_key(speech), recogniser=asdict(cfg))


def recogniser_folder(cfg: RecogniserConfig, speech: str | Path, cache_dir: str | Path) -> Path:
    """Where `recogniser(cfg, speech, cache_dir)` keeps (or will keep) its step."""
    return step_folder(cache_dir, "recogniser", _step_params(cfg, Path(speech)))


def recogniser_cached(cfg: RecogniserConfig, speech: str | Path, cache_dir: str | Path, shipped=None) -> bool:
    """Whether `recogniser(cfg, speech, cache_dir, shipped=shipped)` would load rather than train."""
    return step_ready(cache_dir, "recogniser", _step_params(cfg, Path(speech)), shipped)


def recogniser(cfg: RecogniserConfig, speech: str | Path, cache_dir: str | Path,
               log=note, shipped=None) -> tuple[PhonemeRecogniser, dict]:
    """The recogniser trained on the speech step `speech` (a `cached_step` folder of the miniature's build) under
    `cache_dir` (copied from `shipped` where the repository ships it), built once; and its training history."""
    speech = Path(speech)
    params = _step_params(cfg, speech)
    folder = cached_step(cache_dir, "recogniser", params, lambda f: _train_step(cfg, speech, f), log, shipped)
    symbols = load_json(folder / "symbols.json")
    with global_rng():                       # its random init, overwritten here, draws from the global RNG
        model = CTCModel(cfg.n_mels, len(symbols), cfg.hidden, cfg.layers)
    model.load_state_dict(load_tensors(folder / "recogniser.safetensors"))
    return PhonemeRecogniser(model.eval(), symbols, cfg), load_json(folder / "history.json")
