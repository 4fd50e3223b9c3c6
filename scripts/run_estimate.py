"""How long the paper's settings decode on one GPU, estimated from measured costs (not in `make test`'s fast tier;
about a minute here):

    OMP_NUM_THREADS=1 .venv/bin/python scripts/run_estimate.py [--gpu outputs/gpu-reference/bench_gpu.json]
        [--out outputs/run-estimate] [--frames 4]

At batch 1 an eager step on a GPU costs about its dispatched operations times a price per operation (launches and
Python, not arithmetic: the 0.6B shape's captured call takes 0.54 ms on the H200, its eager AR frame of 15 calls
tens of ms). So:

1. the price per operation is measured on the GPU: the miniature's eager frames in `bench_gpu.json` (ours: the AR
   loop; the official code's: `code_predictor.generate`) over their operations, counted here on the same frames
   (`outputs/gpu-pack/`, `DeviceOps`);
2. the operations per frame at the real depths (talker 28 layers, code predictor 5) are counted here on a random
   checkpoint of the real configuration with small widths (operation counts do not depend on widths): a whole
   synthesised frame through the official generate with our inner loop, and our AR inner loop alone;
3. the speculative inner loop costs the AR loop's time times the miniature's measured eager ratio (spec at N = 32 over
   AR, at the miniature's tokens/step: the paper's higher acceptance would take less);
4. the frames each setting decodes (`helpers.experiment.bench.run_size`) times those milliseconds.

Memory and disk: the pre-flight's upper bounds (`helpers.experiment.preflight.resources.Needs`) for the real
configuration's parameters, counted on the meta device (no weights allocated); Whisper's weights are not counted
here (the pre-flight reads their size from the hub before a run).

Prints the arithmetic as Markdown and writes run_estimate.json and run_estimate.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]
SETTINGS = ("params/qwen3-tts-0.6b-quick.yaml", "params/qwen3-tts-0.6b.yaml")
MINI_N = 32                                # the miniature's eager speculative system priced: spec32


def _ops(fn) -> int:
    from helpers.method.capture import DeviceOps

    with torch.no_grad(), DeviceOps() as ops:
        fn()
    return ops.kernels


def miniature_ops(pack_folder: Path, frames: int) -> dict:
    """Dispatched operations per frame of the miniature's eager AR loop and official generate (mean over frames)."""
    from helpers.experiment.bench.inner_loop_pack import load_pack
    from helpers.measure.latency import official_generate
    from helpers.method.decoding import Decoder
    from helpers.method.sampler import frame_uniforms

    pack = load_pack(pack_folder, "cpu")
    p, sampler = pack.predictor, pack.sampler
    u = frame_uniforms(torch.Generator().manual_seed(0), p.num_codes, batch=frames, device=p.device)
    ar = Decoder(p, sampler, views=False)                          # as the GPU runs it (no views)
    out = {"ar": 0, "official": 0}
    for i in range(frames):
        g, c0 = pack.g[i:i + 1], pack.c0[i:i + 1]
        out["ar"] += _ops(lambda: ar.decode_frame(g, c0, u[i:i + 1]))
        out["official"] += _ops(lambda: official_generate(p, g, c0, sampler))
    return {k: v / frames for k, v in out.items()}


def real_depth_ops(work: Path, frames: int) -> dict:
    """Operations per frame at the real depths: a whole synthesised frame (official generate, our AR inner loop),
    measured as the difference of 2 x frames and frames (the prompt's prefill cancels), and the inner loop alone."""
    from real_shapes import build_checkpoint, scaled_configs
    from qwen3_tiny import build_tiny_datasets

    from helpers.experiment.stages import stages
    from helpers.experiment.run.params import RunParams
    from helpers.method.decoding import Decoder
    from helpers.method.sampler import frame_uniforms

    configs = scaled_configs(work / "configs", talker_layers=28, predictor_layers=5)
    build_checkpoint(work / "tts", torch.float32, configs=configs)
    paths = build_tiny_datasets(work / "data")
    P = RunParams.from_dict(dict(
        run_name="run-estimate", backend="qwen3", model_id_or_path=str(work / "tts"), device="cpu", dtype="float32",
        voxpopuli_id=str(paths["voxpopuli"]), librispeech_id=str(paths["librispeech"]), fleurs_id=str(paths["fleurs"]),
        whisper_id=str(work / "no-whisper"), languages=["en"], train_samples=1, validation_samples=1,
        calibration_samples=1, eval_samples_per_language=1, tree_sizes=[4], tree_size=4,
        output_dir=str(work / "outputs")))
    b, sample = stages.backend(P), stages.samples(P, "train")[0]
    layers = (b.model.talker.config.num_hidden_layers, b.predictor.config.num_hidden_layers)

    def synthesis(n):
        b.max_frames = lambda s: n                                  # random weights: EOS never comes
        return _ops(lambda: b.synthesize(sample, "ar", seed=0))

    whole = (synthesis(2 * frames) - synthesis(frames)) / frames
    p = b.predictor
    g = torch.zeros(1, p.c0_embedding.weight.shape[1], dtype=p.dtype, device=p.device)
    c0 = torch.zeros(1, dtype=torch.long, device=p.device)
    u = frame_uniforms(torch.Generator().manual_seed(0), p.num_codes, batch=1, device=p.device)
    here_ar, gpu_ar = Decoder(p, stages.sampler(P)), Decoder(p, stages.sampler(P), views=False)
    here = _ops(lambda: here_ar.decode_frame(g, c0, u))                # as the synthesis ran it here
    inner = _ops(lambda: gpu_ar.decode_frame(g, c0, u))                # as a GPU runs it
    return {"talker_layers": layers[0], "predictor_layers": layers[1], "synthesis_frame": whole, "inner_ar": inner,
            "talker": whole - here}


def real_parameters() -> dict[str, int]:
    """Elements per tensor of the real checkpoint (talker, code predictor, speech tokenizer), built on the meta
    device from the configuration files in scripts/data/ (the pre-flight's `Found.tensors`)."""
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model
    from real_shapes import CONFIGS, speech_tokenizer_config

    cfg = json.loads((CONFIGS / "config.json").read_text())
    cfg.pop("architectures"), cfg.pop("model_type")
    with torch.device("meta"):
        tts = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(speaker_encoder_config={}, **cfg))
        tokenizer = Qwen3TTSTokenizerV2Model(speech_tokenizer_config())
    return {**{n: t.numel() for n, t in tts.named_parameters()},
            **{f"speech_tokenizer.{n}": t.numel() for n, t in tokenizer.named_parameters()}}


def resources(P, tensors: dict[str, int]) -> dict:
    """The pre-flight's memory and disk bounds of a setting (bytes and how), Whisper's weights left out."""
    from helpers.experiment.preflight.models import Found
    from helpers.experiment.preflight.resources import Needs
    from real_shapes import CONFIGS

    config = json.loads((CONFIGS / "config.json").read_text())
    need = Needs.of(P, Found(P.model_id_or_path, "configuration files", config, tensors),
                    Found(P.whisper_id, "not counted", {}, {}))
    return {"memory": {k: [n, how] for k, (n, how) in need.memory.items()},
            "disk": {k: [n, how] for k, (n, how) in need.disk.items() if k != "models"}}


def estimate(gpu: dict, mini: dict, real: dict, settings: dict) -> dict:
    """Milliseconds per frame on the reference GPU and hours per setting (see the module docstring)."""
    side = gpu["mini"]["side_by_side"]["systems"]
    ar_ms, official_ms = side["ar"]["frame_ms"], side["official"]["frame_ms"]
    spec = side[f"spec{MINI_N}"]
    ours_us, official_us = 1e3 * ar_ms / mini["ar"], 1e3 * official_ms / mini["official"]
    inner_ar = real["inner_ar"] * ours_us / 1e3
    ms = {"talker": real["talker"] * official_us / 1e3, "inner_ar": inner_ar,
          "inner_spec": inner_ar * spec["frame_ms"] / ar_ms}
    out = {"device": gpu["device"], "price_us": {"ours": ours_us, "official": official_us},
           "mini_spec": {"n": MINI_N, "tokens_per_step": spec["tokens_per_step"], "over_ar": spec["frame_ms"] / ar_ms},
           "ms_per_frame": ms, "settings": {}}
    for name, work in settings.items():
        parts = {"AR synthesis": work["ar_frames"] * (ms["talker"] + ms["inner_ar"]),
                 "speculative synthesis": work["spec_frames"] * (ms["talker"] + ms["inner_spec"]),
                 "replay (inner loop alone)": work["replay_frames"] * ms["inner_spec"]}
        out["settings"][name] = {"work": work, "hours": {k: v / 3.6e6 for k, v in parts.items()},
                                 "total_hours": sum(parts.values()) / 3.6e6}
    return out


def markdown(e: dict, mini: dict, real: dict) -> str:
    ms, price = e["ms_per_frame"], e["price_us"]
    lines = [f"# How long the paper's settings decode on one {e['device']} (estimated)", "",
             f"Price per dispatched operation, eager, batch 1 (measured on the {e['device']}, operations counted "
             f"here): ours {price['ours']:.1f} us (the miniature's AR frame over its {mini['ar']:.0f} operations); "
             f"the official code's {price['official']:.1f} us (its generate over {mini['official']:.0f}).", "",
             f"Operations per frame at the real depths (talker {real['talker_layers']} layers, code predictor "
             f"{real['predictor_layers']}): a synthesised frame {real['synthesis_frame']:.0f}, of which our AR inner "
             f"loop {real['inner_ar']:.0f} (as a GPU runs it) and the talker's step and the rest {real['talker']:.0f}.", "",
             f"Milliseconds per frame: talker {ms['talker']:.1f} ({real['talker']:.0f} x {price['official']:.1f} us), "
             f"AR inner loop {ms['inner_ar']:.1f} ({real['inner_ar']:.0f} x {price['ours']:.1f} us), speculative inner "
             f"loop {ms['inner_spec']:.1f} ({ms['inner_ar']:.1f} x {e['mini_spec']['over_ar']:.2f}, the miniature's "
             f"eager spec{e['mini_spec']['n']} over AR at {e['mini_spec']['tokens_per_step']:.2f} tokens/step).", "",
             "| setting | AR frames | speculative frames | replayed frames | AR h | speculative h | replay h | GPU hours |",
             "|---|---|---|---|---|---|---|---|"]
    for name, s in e["settings"].items():
        w, h = s["work"], s["hours"]
        lines.append(f"| {name} | {w['ar_frames']:,.0f} | {w['spec_frames']:,.0f} | {w['replay_frames']:,.0f} | "
                     f"{h['AR synthesis']:.1f} | {h['speculative synthesis']:.1f} | {h['replay (inner loop alone)']:.1f} "
                     f"| {s['total_hours']:.1f} |")
    lines += ["", f"Memory and disk, upper bounds (the pre-flight's arithmetic; {e['parameters'] / 1e6:.0f} M parameters in "
              "the real configuration, Whisper's weights not counted):", ""]
    for name, s in e["settings"].items():
        r = s["resources"]
        for kind in ("memory", "disk"):
            lines.append(f"- {name}, {kind}: {sum(n for n, _ in r[kind].values()) / 1e9:.1f} GB = " + " + ".join(
                f"{k} {n / 1e9:.2f} GB ({how})" for k, (n, how) in r[kind].items()))
    lines += ["", "Frames: utterances x the mean frames per utterance of the paper's Table 1 "
              "(`helpers.experiment.bench.run_size`). Not priced: downloads, the data stage's encoding, "
              "teacher forcing, drafter training, the codec decoder and the ASR (Whisper) of the quality stage."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default=str(ROOT / "outputs" / "gpu-reference" / "bench_gpu.json"))
    ap.add_argument("--pack", default=str(ROOT / "outputs" / "gpu-pack"))
    ap.add_argument("--out", default=str(ROOT / "outputs" / "run-estimate"))
    ap.add_argument("--frames", type=int, default=4, help="frames per count (the synthesis runs 1x and 2x this)")
    args = ap.parse_args(argv)
    from helpers.artifacts import save_json
    from helpers.experiment.run.params import load_params
    from helpers.experiment.run.process import process_settings
    from helpers.experiment.bench.run_size import run_work

    process_settings(int(os.environ.get("OMP_NUM_THREADS", "1")))
    import datasets

    datasets.disable_progress_bars()                   # the local stand-in datasets are built without bars
    gpu = json.loads(Path(args.gpu).read_text())
    mini = miniature_ops(Path(args.pack), args.frames)
    work = Path(tempfile.mkdtemp(prefix="run-estimate-"))
    try:
        real = real_depth_ops(work, args.frames)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    params = {Path(f).stem: load_params(ROOT / f) for f in SETTINGS}
    e = estimate(gpu, mini, real, {name: run_work(P) for name, P in params.items()})
    tensors = real_parameters()
    e["parameters"] = sum(tensors.values())
    for name, P in params.items():
        e["settings"][name]["resources"] = resources(P, tensors)
    e.update(operations={"miniature": mini, "real_depth": real})
    text = markdown(e, mini, real)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_json(out / "run_estimate.json", e)
    (out / "run_estimate.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
