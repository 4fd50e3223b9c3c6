"""Tiny stand-ins for everything the `qwen3` backend downloads: a random Qwen3-TTS checkpoint (talker, code
predictor, text tokenizer and processor, 12 Hz speech tokenizer), a random Whisper, and local audio datasets
laid out as on the hub (parquet files under per-config folders, README configs) or saved with `save_to_disk`.

All are built with the official classes and `save_pretrained`, so the backend loads them by path exactly as it
loads the real ones.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from helpers.backends.languages import LANGUAGES as OFFICIAL_NAMES

CODEC = 64                      # codes per codebook (Mimi needs a power of two)
LANGUAGES = tuple(OFFICIAL_NAMES.values())
SPEAKERS = ("ryan", "anna")
WIDE_HEAD_DIM = 16                # 4 heads x 16 = 64 against hidden 32 (the real 0.6B: 16 x 128 against 1024)
TEXT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_bos>", "<tts_eos>"]
WORDS = "the a cat dog sat ran on mat red blue big small house tree sun moon one two".split()
FLEURS = {"en": "en_us", "de": "de_de", "es": "es_419", "ru": "ru_ru", "ja": "ja_jp", "zh": "cmn_hans_cn"}
SPELLING = {"colour": "color", "colours": "colors", "favourite": "favorite"}   # a few entries of Whisper's english.json
GENERATE_DEFAULTS = dict(do_sample=True, top_k=50, top_p=1.0, temperature=0.9, repetition_penalty=1.05,
                         subtalker_dosample=True, subtalker_top_k=50, subtalker_top_p=1.0,
                         subtalker_temperature=0.9, max_new_tokens=8192)


def _text_tokenizer():
    """A byte-level BPE with the chat specials, trained on a few words ("assistant" is one token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=TEXT_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["assistant\n" * 50, " ".join(WORDS * 20)], trainer)
    return Qwen2TokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|endoftext|>",
                              pad_token="<|endoftext|>", unk_token=None)


def _speech_tokenizer(seed: int):
    """The official 12 Hz tokenizer (Mimi encoder, Qwen decoder) at tiny size, random codebooks."""
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config

    enc = dict(hidden_size=16, num_filters=4, num_hidden_layers=1, intermediate_size=32, num_attention_heads=2,
               num_key_value_heads=2, codebook_size=CODEC, codebook_dim=8, vector_quantization_hidden_dimension=8,
               num_quantizers=16, upsample_groups=16, frame_rate=12.5)
    dec = dict(codebook_size=CODEC, hidden_size=16, latent_dim=16, codebook_dim=16, num_attention_heads=2,
               num_key_value_heads=2, head_dim=8, intermediate_size=32, num_hidden_layers=1, num_quantizers=16,
               decoder_dim=32, vector_quantization_hidden_dimension=8)
    return random_speech_tokenizer(Qwen3TTSTokenizerV2Config(encoder_config=enc, decoder_config=dec), seed)


def random_speech_tokenizer(config, seed: int):
    """The official 12 Hz tokenizer model of a `Qwen3TTSTokenizerV2Config`, random weights and codebooks."""
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    torch.manual_seed(seed)
    model = Qwen3TTSTokenizerV2Model(config).eval()
    with torch.no_grad():                   # codebooks start at zero: every frame would get code 0
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith(("embed_sum", "embedding_sum")):
                t.normal_()
    return model


def _tts_config(tokenizer, talker_hidden: int = 32, predictor_hidden: int = 32, tokenizer_type="qwen3_tts_tokenizer_12hz",
                head_dim: int | None = None):
    """head_dim: of the talker and the code predictor alike; default hidden // heads (heads x head_dim == hidden). The
    real 0.6B's are wider than its hidden size (16 heads x 128 = 2048 against 1024): `WIDE_HEAD_DIM` is that here."""
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig

    ids = {name: CODEC + i for i, name in enumerate(("pad", "bos", "eos", "think", "nothink", "think_bos", "think_eos"))}
    heads = 4
    predictor = dict(vocab_size=CODEC, hidden_size=predictor_hidden, intermediate_size=2 * predictor_hidden,
                     num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=2,
                     head_dim=head_dim or predictor_hidden // heads, num_code_groups=16, max_position_embeddings=64)
    hd = head_dim or talker_hidden // heads
    talker = dict(code_predictor_config=predictor, vocab_size=CODEC + 1024, hidden_size=talker_hidden,
                  intermediate_size=2 * talker_hidden, num_hidden_layers=2, num_attention_heads=heads,
                  num_key_value_heads=2, head_dim=hd, text_hidden_size=16, text_vocab_size=len(tokenizer),
                  num_code_groups=16, max_position_embeddings=512,
                  rope_scaling={"rope_type": "default", "mrope_section": [hd // 4, hd // 8, hd // 8], "interleaved": True},
                  codec_eos_token_id=ids["eos"], codec_think_id=ids["think"], codec_nothink_id=ids["nothink"],
                  codec_think_bos_id=ids["think_bos"], codec_think_eos_id=ids["think_eos"], codec_pad_id=ids["pad"],
                  codec_bos_id=ids["bos"], spk_id={s: CODEC + 40 + i for i, s in enumerate(SPEAKERS)},
                  spk_is_dialect={s: False for s in SPEAKERS},
                  codec_language_id={lang: CODEC + 20 + i for i, lang in enumerate(LANGUAGES)})
    tid = tokenizer.convert_tokens_to_ids
    return Qwen3TTSConfig(talker_config=talker, speaker_encoder_config={}, tokenizer_type=tokenizer_type,
                          tts_model_size="0b6", tts_model_type="custom_voice", im_start_token_id=tid("<|im_start|>"),
                          im_end_token_id=tid("<|im_end|>"), tts_pad_token_id=tid("<tts_pad>"),
                          tts_bos_token_id=tid("<tts_bos>"), tts_eos_token_id=tid("<tts_eos>"))


def build_tiny_tts(folder: Path, seed: int = 0, logit_scale: float = 20.0, head_dim: int | None = None) -> Path:
    """A random CustomVoice checkpoint folder, laid out like Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice; `head_dim`: see
    `_tts_config` (`WIDE_HEAD_DIM`: heads x head_dim twice the hidden size, as in the real 0.6B)."""
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration

    folder = Path(folder)
    tokenizer = _text_tokenizer()
    torch.manual_seed(seed)
    model = Qwen3TTSForConditionalGeneration(_tts_config(tokenizer, head_dim=head_dim)).eval()
    sharpen_code_predictor(model, logit_scale)
    save_tts(folder, model, tokenizer)
    save_speech_tokenizer(folder, _speech_tokenizer(seed))
    return folder


def sharpen_code_predictor(model, logit_scale: float) -> None:
    """Peaked code-predictor targets (its heads scaled), so that drafts can be accepted."""
    with torch.no_grad():
        for head in model.talker.code_predictor.lm_head:
            head.weight.mul_(logit_scale)


def save_tts(folder: Path, model, tokenizer, generation: dict = GENERATE_DEFAULTS,
             speaker_encoder_config: bool = True) -> None:
    """The model, its processor and generation defaults as a checkpoint folder (the speech tokenizer: below).

    qwen_tts 0.1.1 cannot read back its own config.json: `speaker_encoder_config` is saved with a `model_type`
    its config class does not take. It is dropped (the key, or the whole entry as in a CustomVoice config.json)."""
    from qwen_tts.core.models import Qwen3TTSProcessor

    model.save_pretrained(folder)
    config = json.loads((Path(folder) / "config.json").read_text())
    if speaker_encoder_config:
        config["speaker_encoder_config"].pop("model_type")
    else:
        config.pop("speaker_encoder_config")
    (Path(folder) / "config.json").write_text(json.dumps(config, indent=2))
    Qwen3TTSProcessor(tokenizer=tokenizer).save_pretrained(folder)
    (Path(folder) / "generation_config.json").write_text(json.dumps(generation))


def save_speech_tokenizer(folder: Path, speech_tokenizer) -> None:
    """The 12 Hz speech tokenizer and its feature extractor under `folder`/speech_tokenizer."""
    from transformers import EncodecFeatureExtractor

    speech_tokenizer.save_pretrained(Path(folder) / "speech_tokenizer")
    EncodecFeatureExtractor(feature_size=1, sampling_rate=24000).save_pretrained(Path(folder) / "speech_tokenizer")


def build_tiny_whisper(folder: Path, seed: int = 0) -> Path:
    """A random multilingual Whisper (byte-level vocabulary plus Whisper's special tokens) with its processor and an
    English spelling map (normalizer.json, as real checkpoints ship Whisper's english.json)."""
    from transformers import (GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration, WhisperProcessor, WhisperTokenizer)
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({c: i for i, c in enumerate(bytes_to_unicode().values())}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    (folder / "normalizer.json").write_text(json.dumps(SPELLING))
    langs = ["en", "de", "es", "ru", "ja", "zh"]
    specials = (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{x}|>" for x in langs]
                + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                   "<|notimestamps|>"])
    tokenizer = WhisperTokenizer(folder / "vocab.json", folder / "merges.txt", normalizer_file=folder / "normalizer.json",
                                 unk_token="<|endoftext|>",
                                 bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    tid = tokenizer.convert_tokens_to_ids
    eot, sot = tid("<|endoftext|>"), tid("<|startoftranscript|>")
    config = WhisperConfig(vocab_size=len(tokenizer), num_mel_bins=80, d_model=16, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                           max_target_positions=64, decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot,
                           pad_token_id=eot, begin_suppress_tokens=None, suppress_tokens=None)
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, max_length=24,
        is_multilingual=True, lang_to_id={f"<|{x}|>": tid(f"<|{x}|>") for x in langs},
        task_to_id={"transcribe": tid("<|transcribe|>"), "translate": tid("<|translate|>")},
        no_timestamps_token_id=tid("<|notimestamps|>"), suppress_tokens=[], begin_suppress_tokens=[eot])
    model.save_pretrained(folder)
    WhisperProcessor(WhisperFeatureExtractor(feature_size=80), tokenizer).save_pretrained(folder)
    return folder


def _wav(seconds: float, rng: np.random.Generator, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = sum(0.2 * np.sin(2 * np.pi * rng.uniform(100, 800) * t + rng.uniform(0, 6)) for _ in range(3))
    buf = io.BytesIO()
    sf.write(buf, (x + 0.01 * rng.standard_normal(t.size)).astype(np.float32), rate, format="WAV")
    return buf.getvalue()


def _rows(n: int, rng: np.random.Generator, text_column: str, prefix: str) -> dict:
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 5)))) for _ in range(n)]
    return {"id": [f"{prefix}{i}" for i in range(n)], text_column: texts,
            "audio": [{"bytes": _wav(rng.uniform(0.6, 1.4), rng), "path": f"{prefix}{i}.wav"} for i in range(n)]}


def _hub_layout(root: Path, splits: dict[tuple[str, str], dict], conversion: bool = False) -> Path:
    """Parquet files per config and split with a README listing the configs, as parquet hub datasets are; or
    (`conversion`) as the hub's parquet conversion (refs/convert/parquet) is: <config>/<split>/0000.parquet, no README."""
    from datasets import Audio, Dataset

    lines = ["---", "configs:"]
    for (config, split), rows in splits.items():
        file = root / config / split / "0000.parquet" if conversion else root / config / f"{split}-00000-of-00001.parquet"
        file.parent.mkdir(parents=True, exist_ok=True)
        Dataset.from_dict(rows).cast_column("audio", Audio(sampling_rate=16000)).to_parquet(str(file))
        lines += [f"- config_name: {config}", "  data_files:", f"  - split: {split}", f"    path: {config}/{split}-*.parquet"]
    if not conversion:
        (root / "README.md").write_text("\n".join(lines + ["---", ""]))
    return root


def build_tiny_datasets(root: Path, seed: int = 0) -> dict[str, Path]:
    """VoxPopuli (hub layout), LibriSpeech (save_to_disk) and FLEURS in six configs (hub layout)."""
    from datasets import Audio, Dataset, DatasetDict

    rng = np.random.default_rng(seed)
    root = Path(root)
    vox = _hub_layout(root / "voxpopuli", {("en", "train"): _rows(12, rng, "raw_text", "vox")})
    libri = root / "librispeech" / "clean"
    rows = _rows(4, rng, "text", "libri")
    rows["text"] = [t.upper() for t in rows["text"]]
    DatasetDict({"test": Dataset.from_dict(rows).cast_column("audio", Audio(sampling_rate=16000))}).save_to_disk(str(libri))
    fleurs_rows = {(c, "train"): _rows(2, rng, "raw_transcription", c) for c in FLEURS.values()}
    fleurs = _hub_layout(root / "fleurs", fleurs_rows)
    converted = _hub_layout(root / "fleurs_parquet_conversion", fleurs_rows, conversion=True)
    scripted = root / "fleurs_script"             # a loading-script dataset, as google/fleurs is on its main branch
    scripted.mkdir(parents=True, exist_ok=True)
    (scripted / "fleurs_script.py").write_text("import datasets\n\n\nclass Fleurs(datasets.GeneratorBasedBuilder):\n    pass\n")
    return {"voxpopuli": vox, "librispeech": libri.parent, "fleurs": fleurs, "fleurs_parquet_conversion": converted,
            "fleurs_script": scripted}


def tiny_params(paths: dict, **overrides):
    """RunParams of the qwen3 backend on the tiny stand-ins (CPU, float64, a handful of utterances)."""
    from helpers.experiment.run.params import RunParams

    return RunParams.from_dict({**dict(
        run_name="qwen3-tiny", backend="qwen3", model_id_or_path=str(paths["tts"]), device="cpu", dtype="float64",
        voxpopuli_id=str(paths["voxpopuli"]), librispeech_id=str(paths["librispeech"]), fleurs_id=str(paths["fleurs"]),
        voxpopuli_revision="", voxpopuli_data_dir="", fleurs_revision="", fleurs_data_dir="",      # local hub layouts
        whisper_id=str(paths["whisper"]), languages=["en", "ja"], train_samples=8, validation_samples=4,
        calibration_samples=3, eval_samples_per_language=1, extraction_batch_size=4, tree_sizes=[4, 16],
        tree_size=16, drafter_targets="codec"), **overrides})          # the paper's setting, as params/qwen3-*.yaml


def transcribed_runs(b, samples, decoder, seeds: list[int]) -> list[tuple]:
    """Free-running synthesis of each sample with its seed, decoded and transcribed (per language, in order):
    [(synthesis, transcript, audio seconds)]. The evaluation stage's synthesis, decoding and ASR
    (`helpers.experiment.stages.quality.transcripts`) in one call, for the tests that run them on a tiny model."""
    from helpers.experiment.stages.quality import transcripts

    runs = [b.synthesize(s, decoder, seed=seed) for s, seed in zip(samples, seeds, strict=True)]
    audio = [b.decode(r.codes) for r in runs]
    hyps = transcripts(b, samples, audio)
    return [(r, h, len(a) / b.sample_rate) for r, h, a in zip(runs, hyps, audio)]
