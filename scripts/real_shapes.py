"""The qwen3 stages at the EXACT shapes of Qwen3-TTS-12Hz-0.6B-CustomVoice, random weights, on this CPU (not in
`make test`: about 6 minutes and 6 GB):

    OMP_NUM_THREADS=1 .venv/bin/python scripts/real_shapes.py [--threads 1] [--dtype float32] [--frames 12] [--keep DIR]
        [--configs DIR]     # other configuration files (tests/test_real_shapes_script.py: a scaled-down copy)

Builds a random checkpoint from the configuration in scripts/data/qwen3_tts_0.6b_customvoice/ (config.json,
generation_config.json, speech_tokenizer_config.json; SOURCES.md says where each value comes from) through the
official classes and `save_pretrained`, then runs on two short utterances of a local dataset (the stand-ins of
tests/qwen3_tiny.py): load (`backend_factory.load_backend`), the data stage (speech-tokenizer encoding, saved samples),
teacher forcing, a few drafter training steps, calibration, AR and speculative synthesis (frame-capped: random
weights never emit EOS) and decoding. Prints wall time and memory per stage, checkpoint size, parameter counts.

The text tokenizer is a small byte-level BPE padded so that the chat and TTS specials sit at the real ids
(151643-151673, "assistant" 77091, "\\n" 198); the text embedding has the real 151936 rows.

Measured here (2 shared cores, --threads 1, float32), wall s / peak RSS GiB per stage: build + save_pretrained
28.9 / 4.38, load 1.1 / 1.08, data stage (encode + save) 2 train 2.1 / 1.46 and 2 calibration utterances 0.6 / 1.48,
teacher forcing 1.6 / 3.24, 4 training steps 1.7 / 3.71, calibration 3.0 / 3.71, AR synthesis (12 frames)
13.5 / 4.23, speculative (N = 16) 26.2 / 4.84, decode 2.2 / 5.29. Checkpoint 4.31 GB on disk (float32); 905.8 M
parameters in talker + code predictor (code predictor 141.6 M, text embedding 311.2 M), 153.7 M in the speech
tokenizer. AR and speculative codes identical. docs/real-model.md has the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
CONFIGS = ROOT / "scripts" / "data" / "qwen3_tts_0.6b_customvoice"
GiB = 1024 ** 3
SPECIAL_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
               "<tts_pad>": 151671, "<tts_bos>": 151672, "<tts_eos>": 151673}
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def rss() -> int:
    """Resident memory of this process in bytes (Linux /proc; the lifetime peak elsewhere)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Meter:
    """Wall time and memory per stage: RSS at the end, the stage's peak RSS (sampled every 20 ms), lifetime peak."""

    def __init__(self):
        self.rows, self._peak = [], 0
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self):
        while True:
            self._peak = max(self._peak, rss())
            time.sleep(0.02)

    def run(self, name, fn):
        """fn() timed and metered; None (and the error printed) if it raises."""
        gc.collect()
        self._peak, start = rss(), time.perf_counter()
        print(f"-- {name} ...", flush=True)
        try:
            out, status = fn(), "ok"
        except Exception as err:          # report and go on where later stages do not depend on it
            out, status = None, f"FAILED: {type(err).__name__}: {err}"
            traceback.print_exc()
        wall, now = time.perf_counter() - start, rss()
        life = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.rows.append((name, wall, now, max(self._peak, now), life, status))
        print(f"   {wall:.1f} s, rss {now / GiB:.2f} GiB, stage peak {max(self._peak, now) / GiB:.2f} GiB  [{status}]",
              flush=True)
        return out

    def table(self) -> str:
        lines = ["| stage | wall s | RSS after GiB | stage peak GiB | lifetime peak GiB | status |", "|---|---|---|---|---|---|"]
        lines += [f"| {n} | {w:.1f} | {r / GiB:.2f} | {p / GiB:.2f} | {life / GiB:.2f} | {s} |"
                  for n, w, r, p, life, s in self.rows]
        return "\n".join(lines)


# -- the checkpoint --------------------------------------------------------------------------------------------
def text_tokenizer():
    """Byte-level BPE on the tiny test words, its vocabulary padded so that the specials sit at the real Qwen ids.

    Laid out as Qwen2's tokenizer.json (Split(regex), then ByteLevel): with a vocabulary over 100k, transformers
    4.57.3 replaces pre_tokenizer[0] by its 'mistral regex' when qwen_tts loads a local folder saved by 4.57.3."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast
    from qwen3_tiny import WORDS

    small = Tokenizer(models.BPE())
    small.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    small.train_from_iterator(["assistant\n" * 50, " ".join(WORDS * 20)], trainers.BpeTrainer(
        vocab_size=320, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(small.to_str())["model"]
    extras = {f"<|extra_{i}|>": i for i in range(151646, 151671)}
    fixed = {"assistant": 77091, "\u010a": 198, **SPECIAL_IDS, **extras}       # "\n" is byte-level "Ċ"
    slots = [None] * (max(fixed.values()) + 1)
    for token, i in fixed.items():
        slots[i] = token
    rest = iter(t for t in sorted(model["vocab"], key=model["vocab"].get) if t not in fixed)
    slots = [t or next(rest, None) or f"<fill{i}>" for i, t in enumerate(slots)]   # fillers: no merge makes them
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(slots)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_IDS) + list(extras))
    fast = Qwen2TokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|endoftext|>",
                              pad_token="<|endoftext|>", unk_token=None)
    wrong = {t: i for t, i in fixed.items() if fast.convert_tokens_to_ids(t) != i}
    if wrong:
        raise RuntimeError(f"tokens not at their Qwen ids: {wrong}")
    return fast


def speech_tokenizer_config(configs: Path = CONFIGS):
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config

    cfg = json.loads((configs / "speech_tokenizer_config.json").read_text())
    enc = {k: v for k, v in cfg.pop("encoder_config").items() if k not in ("transformers_version", "dtype")}
    enc["frame_rate"] = enc.pop("_frame_rate")
    for key in ("architectures", "model_type"):
        cfg.pop(key)
    return Qwen3TTSTokenizerV2Config(encoder_config=enc, **cfg)


def count(module) -> float:
    return sum(p.numel() for p in module.parameters()) / 1e6


SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8)


def scaled_configs(folder: Path, talker_layers: int = 1, predictor_layers: int = 2, configs: Path = CONFIGS) -> Path:
    """The three configuration files with every width small (`SMALL`), the given depths and every id as it is."""
    folder.mkdir(parents=True)
    cfg = json.loads((configs / "config.json").read_text())
    talker = cfg["talker_config"]
    talker.update(SMALL, num_hidden_layers=talker_layers, text_hidden_size=16)
    talker["rope_scaling"]["mrope_section"] = [2, 1, 1]                     # sums to head_dim / 2
    predictor = talker["code_predictor_config"]
    predictor.update(SMALL, num_hidden_layers=predictor_layers, layer_types=["full_attention"] * predictor_layers)
    (folder / "config.json").write_text(json.dumps(cfg))
    speech = json.loads((configs / "speech_tokenizer_config.json").read_text())
    speech["encoder_config"].update(hidden_size=16, num_filters=4, num_hidden_layers=1, intermediate_size=32,
                                    num_attention_heads=2, num_key_value_heads=2, head_dim=8, codebook_dim=8,
                                    vector_quantization_hidden_dimension=8, upsample_groups=16)
    speech["decoder_config"].update(hidden_size=16, latent_dim=16, codebook_dim=16, num_attention_heads=2,
                                    num_key_value_heads=2, head_dim=8, intermediate_size=32, num_hidden_layers=1,
                                    decoder_dim=32, vector_quantization_hidden_dimension=8)
    (folder / "speech_tokenizer_config.json").write_text(json.dumps(speech))
    (folder / "generation_config.json").write_text((configs / "generation_config.json").read_text())
    return folder


def build_checkpoint(folder: Path, dtype: torch.dtype, seed: int = 0, configs: Path = CONFIGS) -> dict:
    """The random checkpoint folder from the configuration files in `configs`; parameter counts (millions) by part."""
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen3_tiny import random_speech_tokenizer, save_speech_tokenizer, save_tts, sharpen_code_predictor
    from helpers.adapter.global_rng import global_rng

    cfg = json.loads((configs / "config.json").read_text())
    cfg.pop("architectures"), cfg.pop("model_type")
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with global_rng(seed):                                 # the layers' random init
            model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(speaker_encoder_config={}, **cfg)).eval()
    finally:
        torch.set_default_dtype(default)
    sharpen_code_predictor(model, 20.0)
    t = model.talker
    counts = {"talker + code predictor": count(model), "talker.model (28 layers and embeddings)": count(t.model),
              "  of which the text embedding [151936, 2048]": t.model.text_embedding.weight.numel() / 1e6,
              "talker.text_projection": count(t.text_projection), "talker.codec_head": count(t.codec_head),
              "code predictor (5 layers, 15 heads, its embeddings)": count(t.code_predictor)}
    save_tts(folder, model, text_tokenizer(), json.loads((configs / "generation_config.json").read_text()),
             speaker_encoder_config=False)                   # a CustomVoice config.json has none
    del model, t
    gc.collect()
    st = random_speech_tokenizer(speech_tokenizer_config(configs), seed)
    counts["speech tokenizer (encoder + decoder)"] = count(st)
    counts["  of which the decoder"] = count(st.decoder)
    save_speech_tokenizer(folder, st)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    ap.add_argument("--frames", type=int, default=12, help="frame cap of free-running synthesis")
    ap.add_argument("--keep", default="", help="keep the checkpoint and outputs in this folder (default: temporary)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--configs", default=str(CONFIGS), help="the three configuration files (default: the real "
                    "checkpoint's; the smoke test passes a scaled-down copy)")
    args = ap.parse_args(argv)
    from helpers.experiment.run.process import process_settings
    process_settings(args.threads)                       # where this process starts (helpers.experiment.run.process)
    from helpers.experiment.stages import stages
    from helpers.experiment.run.params import RunParams
    from helpers.method.calibration import acceptance_table, expected_tokens_per_step, greedy_tree
    from helpers.method.decoding import Decoder
    from helpers.method.drafters import PositionOffsets
    from helpers.method.training import TrainConfig, train_drafter
    from qwen3_tiny import build_tiny_datasets

    meter = Meter()
    root = Path(args.keep or tempfile.mkdtemp(prefix="qwen3-real-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.dtype}, work folder {root}", flush=True)
    dtype, configs = getattr(torch, args.dtype), Path(args.configs)
    counts = meter.run("build the random checkpoint, save_pretrained",
                       lambda: build_checkpoint(root / "tts", dtype, configs=configs))
    if counts is None:
        print(meter.table())
        return 1
    sizes = {str(p.relative_to(root / "tts")): p.stat().st_size for p in sorted((root / "tts").rglob("*")) if p.is_file()}
    paths = build_tiny_datasets(root / "data")
    P = RunParams.from_dict(dict(
        run_name="qwen3-real-shapes", backend="qwen3", model_id_or_path=str(root / "tts"), device="cpu",
        dtype=args.dtype, voxpopuli_id=str(paths["voxpopuli"]), librispeech_id=str(paths["librispeech"]),
        fleurs_id=str(paths["fleurs"]), whisper_id=str(root / "no-whisper"), languages=["en"], train_samples=2,
        validation_samples=1, calibration_samples=2, eval_samples_per_language=1, tree_sizes=[4, 16], tree_size=16,
        output_dir=str(root / "outputs")))
    b = meter.run("load (backend_factory.backend: load_backend, once per process)", lambda: stages.backend(P))
    if b is None:
        print(meter.table())
        return 1
    train = meter.run("data stage: encode and save 2 train utterances", lambda: stages.samples(P, "train"))
    cal = meter.run("data stage: encode and save 2 calibration utterances", lambda: stages.samples(P, "calibration"))
    tf = meter.run("teacher forcing (2 train utterances)", lambda: stages.teacher_forced(P, "train"))
    predictor = b.predictor
    drafter = PositionOffsets(predictor, depth=3)
    trained = meter.run("drafter training (offsets, depth 3, 4 epochs of 1 batch)", lambda: train_drafter(
        drafter, tf[1][:], tf[2], TrainConfig(epochs=4, lr=3e-2, batch_size=32), progress=False))

    def calibration():
        g, codes = b.teacher_forced(cal)
        table = acceptance_table(drafter, predictor.teacher_forced_hidden(g, codes), codes, width=4)
        tree = greedy_tree(table, 16)
        return table, tree, expected_tokens_per_step(tree, table)

    calib = meter.run("calibration (teacher-forced acceptance, greedy tree N = 16)", calibration)
    b.max_frames = lambda sample: args.frames                          # random weights: EOS never comes
    ar = meter.run(f"AR synthesis ({args.frames} frames)", lambda: b.synthesize(train[0], "ar", seed=3))
    decoder = Decoder(predictor, stages.sampler(P), drafter, calib[1], core=b.core)   # the AR's copies
    spec = meter.run(f"speculative synthesis ({args.frames} frames, N = 16)", lambda: b.synthesize(train[0], decoder, seed=3))
    audio = meter.run("decode to audio (speech tokenizer decoder)", lambda: b.decode(spec.codes))
    if any(row[5] != "ok" for row in meter.rows):
        print("\n" + meter.table())
        return 1

    print("\n== checkpoint on disk ==")
    print("\n".join(f"  {name}: {size / 1e9:.3f} GB" for name, size in sizes.items() if size > 1 << 20))
    print(f"  total: {sum(sizes.values()) / 1e9:.3f} GB ({args.dtype})")
    print("\n== parameter counts (millions) ==")
    print("\n".join(f"  {name}: {n:.1f} M" for name, n in counts.items()))
    print("\n== results ==")
    print("  train utterances:", [(s.id, s.text, tuple(s.codes.shape), s.input_ids.shape[1]) for s in train])
    print("  teacher forcing: g", tuple(tf[0].shape), "codes", tuple(tf[2].shape))
    print("  drafter loss:", [round(x, 2) for x in trained.loss_history])
    print("  acceptance table:", [[round(float(v), 3) for v in row] for row in calib[0]])
    print(f"  tree size {calib[1].size}, expected tokens/step {calib[2]:.3f}")
    same = torch.equal(ar.codes, spec.codes)
    print(f"  AR codes {tuple(ar.codes.shape)}, speculative {tuple(spec.codes.shape)}, identical: {same}, "
          f"tokens/step {spec.tokens_per_step:.3f}")
    print(f"  audio: {audio.shape[0]} samples ({audio.shape[0] / b.sample_rate:.2f} s)")
    print("\n" + meter.table())
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
