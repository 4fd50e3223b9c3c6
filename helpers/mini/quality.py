"""The miniature's quality report: does it show the method, and why does it accept what it accepts.

    python -m helpers.mini.quality [--preset mini|smoke] [--out outputs/mini-quality]

Measures, on the built miniature (helpers.mini.build): codec error per stage count; validation
cross-entropy per code position next to the uniform baseline; drafters trained on teacher-forced
English (offsets, Medusa heads) beside reused heads; trees calibrated on free-running English
synthesis; tokens/step on free-running evaluation synthesis at N = 16 and 32; the ceilings (target
entropy and top probability, the ideal drafter's acceptance); AR vs speculative codes compared over
whole utterances; WER of espeak audio, codec round trip, AR and speculative synthesis (English).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch

from ..artifacts import save_json
from ..calibration import acceptance_table, expected_tokens_per_step, greedy_tree
from ..ceiling import drafter_ceiling, target_sharpness
from ..code_predictor import CodePredictor
from ..decoding import SpeculativeDecoder
from ..drafters import MedusaHeads, PositionOffsets, ReusedHeads
from ..sampling import SamplerConfig
from ..synthesis import synthesize
from ..training import TrainConfig, train_drafter
from . import asr
from .build import MINI, SMOKE, Item, Mini, build_mini
from .codec import SAMPLE_RATE
from ..talker_inputs import talker_states
from .train import validation_losses

TREE_SIZES = (4, 8, 16, 32, 64)


def teacher_forced(mini: Mini, items: list[Item]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """g [F, H_talker], h [F, 15, H], codes [F, 16] over every frame of the items (teacher forcing)."""
    predictor = CodePredictor.from_talker(mini.model.talker)
    g = torch.cat(talker_states(mini.model, [mini.utterance(it) for it in items]))
    codes = torch.cat([it.codes for it in items])
    return g, predictor.teacher_forced_hidden(g, codes), codes


def free_running(mini: Mini, items: list[Item], decoder, seed: int) -> list:
    """Synthesize every item (seed + index); returns the Synthesis list."""
    return [synthesize(mini.model, mini.vocab.chat_ids(it.phonemes), it.language, it.speaker, decoder,
                       seed=seed + i, max_frames=len(it.phonemes) + 25) for i, it in enumerate(items)]


def wer_rows(mini: Mini, items: list[Item], syntheses: dict[str, list]) -> dict[str, float]:
    """pocketsphinx WER (English) of the espeak audio, the codec round trip and each synthesis."""
    refs = [it.text for it in items]
    rows = {"espeak reference": [mini.audio(it) for it in items],
            "codec round trip": [mini.codec.decode(it.codes.numpy()) for it in items]}
    for name, results in syntheses.items():
        rows[name] = [mini.codec.decode(s.codes.numpy()) for s in results]
    return {name: asr.wer(refs, [asr.transcribe(a, SAMPLE_RATE) for a in audio]) for name, audio in rows.items()}


def quality_report(mini: Mini, seed: int = 0, ceiling_frames: int = 40, progress: bool = True) -> dict:
    torch.set_num_threads(1)                                 # tiny matrices: one thread is fastest
    model = mini.model.double()
    predictor = CodePredictor.from_talker(model.talker)
    sampler = SamplerConfig()
    report: dict = {"stage_errors": mini.history["stage_errors"]["pretrain_val"],
                    "codebook_sizes": list(mini.codec.sizes)}
    c0_ce, ce = validation_losses(model, [mini.utterance(it) for it in mini.items["pretrain_val"]])
    report["validation_ce"] = {"c0": c0_ce, "per_position": ce.tolist(),
                               "uniform": [math.log(s) for s in mini.codec.sizes[1:]]}

    # drafters: trained on teacher-forced English, like the paper's offsets on VoxPopuli
    _, h_train, codes_train = teacher_forced(mini, mini.items["offsets_train"])
    drafters = {"reused": ReusedHeads(predictor), "offsets": PositionOffsets(predictor),
                "medusa": MedusaHeads(predictor)}
    for name in ("offsets", "medusa"):
        train_drafter(drafters[name], h_train, codes_train, TrainConfig(epochs=1, seed=seed), progress=progress)

    # calibration: free-running AR synthesis of English, acceptance tables and greedy trees
    calib = free_running(mini, mini.items["calibration"], "ar", seed=seed + 10_000)
    g_cal = torch.cat([s.g for s in calib]).to(predictor.dtype)
    codes_cal = torch.cat([s.codes for s in calib])
    h_cal = predictor.teacher_forced_hidden(g_cal, codes_cal)
    tables = {name: acceptance_table(d, h_cal, codes_cal, width=8) for name, d in drafters.items()}
    report["acceptance"] = {name: a.tolist() for name, a in tables.items()}
    report["added_params"] = {name: d.added_params for name, d in drafters.items()}
    report["expected_tokens_per_step"] = {name: {n: expected_tokens_per_step(greedy_tree(a, n), a) for n in TREE_SIZES}
                                          for name, a in tables.items()}
    entropy, top = target_sharpness(predictor, h_cal, sampler)
    report["target"] = {"entropy": entropy.tolist(), "top_prob": top.tolist()}
    pick = torch.linspace(0, len(codes_cal) - 1, min(ceiling_frames, len(codes_cal))).long()
    ceiling, covered = drafter_ceiling(predictor, g_cal[pick], codes_cal[pick], sampler, depth=3, width=32, m=8, beam=1024)
    report["ceiling"], report["ceiling_covered_mass"] = ceiling.tolist(), covered.tolist()

    # evaluation: free-running synthesis, AR vs speculative from the same seeds
    evaluation = mini.items["evaluation"]
    english = [it for it in evaluation if it.lang == "en"]
    ar = free_running(mini, evaluation, "ar", seed=seed)
    measured, lossless = {}, {"frames_compared": 0, "frames_identical": 0, "utterances_identical": 0}
    spec_best = None
    for name, drafter in drafters.items():
        for n in (16, 32):
            decoder = SpeculativeDecoder(predictor, drafter, greedy_tree(tables[name], n), sampler)
            items = evaluation if (name, n) == ("offsets", 32) else english
            runs = free_running(mini, items, decoder, seed=seed)
            if items is evaluation:
                spec_best = runs
            ref = ar if items is evaluation else [ar[evaluation.index(it)] for it in items]
            for a_run, s_run in zip(ref, runs):
                same = a_run.codes.shape == s_run.codes.shape and bool(torch.equal(a_run.codes, s_run.codes))
                rows = min(len(a_run.codes), len(s_run.codes))
                lossless["frames_compared"] += max(len(a_run.codes), len(s_run.codes))
                lossless["frames_identical"] += int((a_run.codes[:rows] == s_run.codes[:rows]).all(-1).sum())
                lossless["utterances_identical"] += int(same)
            measured.setdefault(name, {})[n] = 15 * sum(len(r.calls) for r in runs) / sum(sum(r.calls) for r in runs)
    report["measured_tokens_per_step"] = measured
    report["lossless"] = lossless
    report["out_of_codebook_codes"] = {"ar": sum(mini.codec.out_of_codebook(r.codes.numpy()) for r in ar),
                                       "total": sum(r.codes.numel() for r in ar)}
    report["languages"] = {}
    for lang in sorted({it.lang for it in evaluation}):
        idx = [i for i, it in enumerate(evaluation) if it.lang == lang]
        calls = sum(sum(spec_best[i].calls) for i in idx)
        frames = sum(len(spec_best[i].calls) for i in idx)
        report["languages"][lang] = {"toks_per_step_ar": 1.0, "toks_per_step_spec": 15 * frames / calls,
                                     "frames": frames}
    en_idx = [evaluation.index(it) for it in english]
    report["wer_en"] = wer_rows(mini, english, {"AR synthesis": [ar[i] for i in en_idx],
                                                "speculative synthesis": [spec_best[i] for i in en_idx]})
    return report


def render(report: dict, config_name: str, seconds: float) -> str:
    """The report as Markdown."""
    r = report
    lines = [f"# Miniature quality report ({config_name})", "",
             f"Built and measured in {seconds / 60:.1f} min.", "",
             "## Codec: relative log-mel error by number of stages", "",
             "| stages | " + " | ".join(str(k) for k in (0, 1, 2, 4, 8, 16)) + " |",
             "|---|" + "---|" * 6,
             "| error | " + " | ".join(f"{r['stage_errors'][k]:.3f}" for k in (0, 1, 2, 4, 8, 16)) + " |", "",
             f"Codebook sizes c0..c15: {r['codebook_sizes']}", "",
             "## Code predictor: validation cross-entropy (nats) per code position", "",
             f"Talker c0 cross-entropy: {r['validation_ce']['c0']:.2f} (uniform {math.log(r['codebook_sizes'][0]):.2f})", "",
             "| position | " + " | ".join(str(t) for t in range(1, 16)) + " |", "|---|" + "---|" * 15,
             "| CE | " + " | ".join(f"{x:.2f}" for x in r["validation_ce"]["per_position"]) + " |",
             "| uniform | " + " | ".join(f"{x:.2f}" for x in r["validation_ce"]["uniform"]) + " |",
             "| entropy of p_t | " + " | ".join(f"{x:.2f}" for x in r["target"]["entropy"]) + " |",
             "| top prob of p_t | " + " | ".join(f"{x:.2f}" for x in r["target"]["top_prob"]) + " |", "",
             "## Tokens/step (free-running evaluation synthesis; AR = 1.00)", "",
             "| drafter | added params | expected N=16 | measured N=16 | expected N=32 | measured N=32 |",
             "|---|---|---|---|---|---|"]
    for name in ("reused", "medusa", "offsets"):
        e, m = r["expected_tokens_per_step"][name], r["measured_tokens_per_step"][name]
        lines.append(f"| {name} | {r['added_params'][name]:,} | {e[16]:.2f} | {m[16]:.2f} | {e[32]:.2f} | {m[32]:.2f} |")
    lines += ["", "Measured on English evaluation utterances, except offsets at N=32: all six languages.", "",
              "## Acceptance vs ceiling: top-m hit rate at depth j (m = 1, 2, 4, 8)", "",
              "| depth | m=1..8 " + "| " * 3 + "|", "|---|---|---|---|---|"]
    for j in range(3):
        row = {name: np.cumsum(r["acceptance"][name][j]) for name in r["acceptance"]}
        ceil = np.cumsum(r["ceiling"][j])
        for name, vals in list(row.items()) + [("ideal drafter (ceiling)", ceil)]:
            lines.append(f"| {j + 1} {name} | " + " | ".join(f"{vals[m - 1]:.2f}" for m in (1, 2, 4, 8)) + " |")
    lines += ["", "The ceiling enumerates the most probable intermediate codes (32 per step, 1,024 paths); the paths "
              "cover " + ", ".join(f"{c:.2f}" for c in r["ceiling_covered_mass"]) + " of the mass at depth 1, 2, 3 "
              "(a lower bound).", "", "## Per language (offsets, N = 32)", "", "| language | frames | tokens/step AR | tokens/step spec |",
              "|---|---|---|---|"]
    for lang, row in r["languages"].items():
        lines.append(f"| {lang} | {row['frames']} | 1.00 | {row['toks_per_step_spec']:.2f} |")
    lines += ["", "Only English has an offline ASR (pocketsphinx); the other languages have no WER here.", "",
              "## WER, English (pocketsphinx, normalised: lowercase, numbers as words, no punctuation)", "",
              "| audio | WER |", "|---|---|"]
    lines += [f"| {name} | {w:.3f} |" for name, w in r["wer_en"].items()]
    lo = r["lossless"]
    lines += ["", "## Losslessness", "",
              f"Speculative vs AR codes from the same seeds: {lo['frames_identical']}/{lo['frames_compared']} frames and "
              f"{lo['utterances_identical']} utterances identical.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=("mini", "smoke"), default="mini")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default="outputs/cache/mini")
    args = ap.parse_args(argv)
    start = time.time()
    mini = build_mini(MINI if args.preset == "mini" else SMOKE, args.cache)
    report = quality_report(mini)
    out = Path(args.out or f"outputs/{args.preset}-quality")
    save_json(out / "quality.json", report)
    text = render(report, args.preset, time.time() - start)
    (out / "report.md").write_text(text)
    print(text)
    lo = report["lossless"]
    if lo["frames_identical"] != lo["frames_compared"]:
        raise SystemExit("speculative codes differ from AR codes: losslessness broken")


if __name__ == "__main__":
    main()
