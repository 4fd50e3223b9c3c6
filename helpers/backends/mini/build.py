"""One call builds the miniature: corpus -> speech -> codec -> codes -> trained model, each step cached.

    mini = build_mini(MINI)          # or SMOKE for CI; a MiniBuildConfig for anything else

Every step's folder under `cache_dir` is keyed by the parameters that made it (and the keys of the
steps before it), so changing a parameter rebuilds that step and everything after it, and nothing else.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
from tqdm.auto import tqdm

from helpers.artifacts import (build_seconds, cached_step, load_json, load_tensors, note, params_key, save_json,
                               save_tensors, step_ready, was_shipped)
from helpers.backends.mini import espeak
from helpers.backends.mini.codec import CodecConfig, RVQCodec, fit_codec, frame_features
from helpers.backends.languages import CODES as LANGS, LANGUAGES
from helpers.backends.mini.corpus import make_corpus
from helpers.backends.mini.model import MiniModelSpec, TextVocab, build_mini_model
from helpers.backends.mini.numerics import keyed_paths, numeric_paths
from helpers.backends.mini.phoneme_asr import PhonemeRecogniser, RecogniserConfig, recogniser, recogniser_cached
from helpers.backends.mini.speech import speak_all, speech_key
from helpers.adapter.global_rng import global_rng
from helpers.adapter.talker_inputs import Utterance
from helpers.method.checks import positive_int
from helpers.backends.mini.train import MiniTrainConfig, train_mini

ALL = tuple(LANGS)
EN = ("en",)


@dataclass(frozen=True)
class MiniBuildConfig:
    """Everything that determines the miniature. Sentence counts are per language of the role."""

    seed: int = 0
    pretrain: int = 300                    # the miniature's own training set, per language (all six)
    pretrain_val: int = 20                 # held out, per language: validation cross-entropy
    offsets_train: int = 300               # English: drafter training (the paper: VoxPopuli)
    offsets_val: int = 50                  # English: drafter validation
    calibration: int = 30                  # English: tree calibration (the paper: LibriSpeech)
    evaluation: int = 10                   # per language: evaluation (the paper: FLEURS)
    speakers: tuple[str, ...] = tuple(espeak.SPEAKERS)
    eval_speaker: str = "f5"               # the voice pocketsphinx understands best
    codec: CodecConfig = CodecConfig()
    model: MiniModelSpec = MiniModelSpec(talker_hidden=128, talker_layers=3, predictor_hidden=128, predictor_layers=3)
    train: MiniTrainConfig = MiniTrainConfig(epochs=5, lr=3e-3, predictor_steps=600, predictor_lr=2e-3)
    recogniser: RecogniserConfig = RecogniserConfig()   # the phoneme recogniser (PER), on the pretrain speech

    def __post_init__(self):
        for name in ("pretrain", "pretrain_val", "offsets_train", "offsets_val", "calibration", "evaluation"):
            positive_int(name, getattr(self, name))
        if max(self.codec.sizes) > self.model.codec_size:
            raise ValueError(f"codebooks of up to {max(self.codec.sizes)} codes need model.codec_size >= that, got "
                             f"{self.model.codec_size}")
        for s in self.speakers + (self.eval_speaker,):
            if s not in espeak.SPEAKERS:
                raise ValueError(f"unknown speaker {s!r}; allowed: {', '.join(espeak.SPEAKERS)}")

    def roles(self) -> dict[str, tuple[tuple[str, ...], int]]:
        return {"pretrain": (ALL, self.pretrain), "pretrain_val": (ALL, self.pretrain_val),
                "offsets_train": (EN, self.offsets_train), "offsets_val": (EN, self.offsets_val),
                "calibration": (EN, self.calibration), "evaluation": (ALL, self.evaluation)}


MINI = MiniBuildConfig()
SMOKE = MiniBuildConfig(pretrain=24, pretrain_val=3, offsets_train=24, offsets_val=6, calibration=6, evaluation=2,
                        codec=CodecConfig(sizes=(256,) + (8,) * 15, pca_dim=32, kmeans_iters=4),
                        model=MiniModelSpec(codec_size=256, talker_hidden=64, talker_layers=2, predictor_hidden=64,
                                            predictor_layers=2, text_hidden=32),
                        train=MiniTrainConfig(epochs=2, batch_size=8, predictor_steps=20, predictor_batch=64,
                                              val_every=10),
                        recogniser=RecogniserConfig(hidden=64, epochs=12, batch_size=8))


@dataclass
class Item:
    """One sentence of the corpus as the miniature sees it."""

    role: str
    lang: str
    text: str
    speaker: str
    phonemes: list[str]
    codes: torch.Tensor                    # [T, 16]

    @property
    def language(self) -> str:
        return LANGUAGES[self.lang]


@dataclass
class Mini:
    """The built miniature: official model, codec, text vocabulary, corpus by role, where it lives."""

    config: MiniBuildConfig
    model: Qwen3TTSForConditionalGeneration
    codec: RVQCodec
    vocab: TextVocab
    items: dict[str, list[Item]]
    folders: dict[str, Path]
    history: dict = field(default_factory=dict)
    shipped: Path | None = None            # the trained steps committed with the repository (None: build them)
    _loaded: dict = field(default_factory=dict, repr=False)

    def utterance(self, item: Item) -> Utterance:
        return Utterance(self.vocab.chat_ids(item.phonemes), item.language, item.speaker, item.codes)

    def recogniser(self, log=note) -> tuple[PhonemeRecogniser, dict]:
        """The phoneme recogniser trained on this build's pretrain speech (a cached step beside the others), and its
        training history."""
        if "recogniser" not in self._loaded:
            self._loaded["recogniser"] = recogniser(self.config.recogniser, self.folders["speech"],
                                                    self.folders["speech"].parent, log, self.shipped)
        return self._loaded["recogniser"]

    def audio(self, item: Item) -> np.ndarray:
        """The espeak reference audio of an item (16 kHz)."""
        tensors = load_tensors(self.folders["speech"] / "audio.safetensors")
        index = self.items[item.role].index(item)
        return tensors[f"{item.role}.audio"][tensors[f"{item.role}.offsets"][index]:
                                             tensors[f"{item.role}.offsets"][index + 1]].numpy()


def _speech_step(cfg: MiniBuildConfig, folder: Path) -> None:
    corpus = make_corpus(cfg.seed, cfg.roles())
    rng = random.Random(f"speakers:{cfg.seed}")
    manifest, tensors = {}, {}
    for role, sentences in tqdm(corpus.items(), desc="speech"):
        fixed = role in ("evaluation",)
        items = [(lang, text, cfg.eval_speaker if fixed else rng.choice(cfg.speakers)) for lang, text in sentences]
        spoken = speak_all(items)
        manifest[role] = [dict(lang=s.lang, text=s.text, speaker=s.speaker, phonemes=s.phonemes) for s in spoken]
        tensors[f"{role}.audio"] = torch.from_numpy(np.concatenate([s.audio for s in spoken]))
        tensors[f"{role}.offsets"] = torch.from_numpy(np.cumsum([0] + [len(s.audio) for s in spoken]))
    save_tensors(folder / "audio.safetensors", tensors)
    save_json(folder / "manifest.json", manifest)


def _role_audio(folder: Path) -> dict[str, list[np.ndarray]]:
    t = load_tensors(folder / "audio.safetensors")
    roles = {k.split(".")[0] for k in t}
    out = {}
    for role in roles:
        audio, offsets = t[f"{role}.audio"].numpy(), t[f"{role}.offsets"].tolist()
        out[role] = [audio[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    return out


def _codec_step(cfg: MiniBuildConfig, speech: Path, folder: Path) -> None:
    audio, manifest = _role_audio(speech), load_json(speech / "manifest.json")
    feats = {role: [frame_features(a, cfg.codec.n_mels) for a in tqdm(clips, desc=f"features {role}")]
             for role, clips in audio.items()}
    phonemes = {role: [r["phonemes"] for r in rows] for role, rows in manifest.items()}
    symbols = sorted({p for rows in phonemes.values() for utt in rows for p in utt})   # the text's symbols
    codec = fit_codec(feats["pretrain"], cfg.codec, phonemes["pretrain"], symbols)
    codec.save(folder / "codec.safetensors")
    codes = {}
    for role, fs in feats.items():
        c = [codec.encode_features(f, p) for f, p in zip(fs, phonemes[role])]
        codes[f"{role}.codes"] = torch.from_numpy(np.concatenate(c))
        codes[f"{role}.offsets"] = torch.from_numpy(np.cumsum([0] + [len(x) for x in c]))
    save_tensors(folder / "codes.safetensors", codes)
    val = np.concatenate(feats["pretrain_val"])
    val_phonemes = [p for utt in phonemes["pretrain_val"] for p in utt]
    save_json(folder / "stage_errors.json", {"pretrain_val": codec.stage_errors(val, val_phonemes)})


def _load_items(speech: Path, codes_folder: Path) -> dict[str, list[Item]]:
    manifest = load_json(speech / "manifest.json")
    codes = load_tensors(codes_folder / "codes.safetensors")
    items = {}
    for role, rows in manifest.items():
        c, offsets = codes[f"{role}.codes"], codes[f"{role}.offsets"].tolist()
        items[role] = [Item(role, r["lang"], r["text"], r["speaker"], r["phonemes"], c[offsets[i]:offsets[i + 1]])
                       for i, r in enumerate(rows)]
    return items


def _vocab(items: dict[str, list[Item]]) -> TextVocab:
    return TextVocab(sorted({p for role in items.values() for it in role for p in it.phonemes}))


def _model_step(cfg: MiniBuildConfig, items: dict[str, list[Item]], folder: Path) -> None:
    vocab = _vocab(items)
    model = build_mini_model(cfg.model, vocab, list(cfg.speakers), seed=cfg.seed)
    data, val = ([Utterance(vocab.chat_ids(it.phonemes), it.language, it.speaker, it.codes) for it in items[role]]
                 for role in ("pretrain", "pretrain_val"))
    result = train_mini(model, data, cfg.train, val=val)
    save_tensors(folder / "model.safetensors", model.state_dict())
    model.config.save_pretrained(folder)
    save_json(folder / "vocab.json", vocab.symbols)
    save_json(folder / "history.json", asdict(result))


def load_model(folder: Path) -> tuple[Qwen3TTSForConditionalGeneration, TextVocab]:
    """The trained miniature from its folder (config.json, model.safetensors, vocab.json)."""
    raw = load_json(folder / "config.json")
    raw["speaker_encoder_config"].pop("model_type", None)     # qwen_tts 0.1.1 cannot read back its own key
    config = Qwen3TTSConfig.from_dict(raw)
    with global_rng():                           # its random init, overwritten here, draws from the global RNG
        model = Qwen3TTSForConditionalGeneration(config)
    model.load_state_dict(load_tensors(folder / "model.safetensors"))
    vocab = TextVocab([])
    vocab.symbols = load_json(folder / "vocab.json")
    vocab.index = {s: i for i, s in enumerate(vocab.symbols)}
    return model.eval(), vocab


MODEL_THREADS = 2           # the model step's torch threads: batches of 16 utterances are large enough for two


@contextmanager
def fixed_threads(n: int):
    """Torch and every BLAS / OpenMP pool at `n` threads inside the block (restored after): k-means, PCA and training
    give the same numbers on any machine of this kind, whatever its core count (reductions split by thread count
    round differently, so the count is fixed, and part of the model step's cache key)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(threads)


def build_mini(cfg: MiniBuildConfig = MINI, cache_dir: str | Path = "outputs/cache/mini", log=note,
               recogniser_beside: bool = False, shipped: str | Path | None = None) -> Mini:
    """Build (or load from the cache) every step of the miniature: speech and codec on one thread, the model's
    training on MODEL_THREADS (`fixed_threads`). shipped: a folder of trained steps committed with the repository
    (`SHIPPED_STEPS`, written by `make mini`); a step whose key is there is copied into the cache instead of built.
    The keys cover every parameter and the speech's content, so a shipped step is the one this build would train.
    recogniser_beside: where the model is still to be trained, the phoneme recogniser (built on demand otherwise,
    `Mini.recogniser`) trains meanwhile in its own process, on the core that the codec's k-means leaves idle and
    two training threads leave partly idle."""
    with fixed_threads(1):
        return _build(cfg, cache_dir, log, recogniser_beside, Path(shipped) if shipped else None)


def _recogniser_step(cfg: RecogniserConfig, speech: Path, cache_dir: Path) -> None:
    """A spawned process's work: the recogniser's cached step, on one thread."""
    with fixed_threads(1):
        recogniser(cfg, speech, cache_dir, log=lambda line: None)


def _start_recogniser(cfg: MiniBuildConfig, speech: Path, cache_dir: Path, shipped: Path | None):
    """The recogniser's training in a spawned process (None where it is cached or shipped)."""
    import multiprocessing
    if recogniser_cached(cfg.recogniser, speech, cache_dir, shipped):
        return None
    process = multiprocessing.get_context("spawn").Process(target=_recogniser_step,
                                                           args=(cfg.recogniser, speech, Path(cache_dir)))
    process.start()
    return process


def _build(cfg: MiniBuildConfig, cache_dir: str | Path, log, recogniser_beside: bool, shipped: Path | None) -> Mini:
    speech_params = dict(seed=cfg.seed, roles=cfg.roles(), speakers=cfg.speakers, eval_speaker=cfg.eval_speaker)
    speech = cached_step(cache_dir, "speech", speech_params, lambda f: _speech_step(cfg, f), log)
    paths = keyed_paths()                        # OpenBLAS's and MKL's paths in effect: part of the keys
    codec_params = dict(speech=params_key(speech_params), audio=speech_key(speech), codec=asdict(cfg.codec),
                        numerics=paths)
    model_params = dict(codec=params_key(codec_params), model=asdict(cfg.model), train=asdict(cfg.train),
                        seed=cfg.seed, threads=MODEL_THREADS, numerics=paths)
    to_train = not step_ready(cache_dir, "model", model_params, shipped)
    beside = _start_recogniser(cfg, speech, Path(cache_dir), shipped) if recogniser_beside and to_train else None
    codec_folder = cached_step(cache_dir, "codec", codec_params, lambda f: _codec_step(cfg, speech, f), log, shipped)
    items = _load_items(speech, codec_folder)

    def model_step(folder):
        with fixed_threads(MODEL_THREADS):
            _model_step(cfg, items, folder)
        save_json(folder / "numerics.json", numeric_paths())        # ATen's capability included (numerics.py)

    model_folder = cached_step(cache_dir, "model", model_params, model_step, log, shipped)
    if beside is not None:
        beside.join()
        if beside.exitcode != 0:             # trained (and its error raised) on demand instead
            log(f"recogniser: its training beside the model stopped with exit code {beside.exitcode}")
    model, vocab = load_model(model_folder)
    folders = dict(speech=speech, codec=codec_folder, model=model_folder)
    return Mini(cfg, model, RVQCodec.load(codec_folder / "codec.safetensors"), vocab, items, folders,
                dict(training=load_json(model_folder / "history.json"),
                     stage_errors=load_json(codec_folder / "stage_errors.json"),
                     build_s={step: build_seconds(f) for step, f in folders.items()},
                     shipped=[step for step in ("codec", "model") if was_shipped(folders[step])]),
                shipped)
