"""The README's results block, from a run's metrics.json and, where it exists, the committed GPU reference: headline
rows (tokens/step per drafter, losslessness, speech quality, speed at both shapes), each latency labelled with the
machine it was measured on.

    results_block(run_dir)                    # the block, between `<!-- results:begin -->` and `<!-- results:end -->`
    python -m helpers.report.readme_results [outputs/mini-reference] [--write README.md]

The command prints the block, or replaces it in the README; tests/test_readme.py checks the README's block equals
the one generated from the reference run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from helpers.measure.full_size_frames import spread_words
from helpers.measure.machine import measured_on
from helpers.report.deployments import exact_frames
from helpers.report.gpu_reference import GPU_REFERENCE, gpu_label, gpu_summary, load_gpu_reference
from helpers.report.paper import DRAFTER_NAMES, PAPER, PAPER_DRAFTERS, PAPER_N, paper_speedup
from helpers.report.projection import projection_at, tokens_label
from helpers.report.quality_parity import mean_present
from helpers.report.tables import markdown


BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def results_rows(m: dict) -> list[dict]:
    """Headline rows: tokens/step per drafter, losslessness, speech quality, speed (both shapes), each latency with
    the machine it was measured on."""
    n = m["run"]["params"]["tree_size"]
    rows = []
    for kind, paper_key in PAPER_DRAFTERS.items():
        d = m["drafters"].get(kind)
        if d:
            rows.append({"result": f"tokens/step, {DRAFTER_NAMES[kind]}, N = {n} (measured; expected)",
                         "this run": f"{d['tokens_per_step']:.2f}; {d['expected_tokens_per_step']:.2f}",
                         "paper (0.6B)": f"{PAPER['table2_drafters'][paper_key]['tokens_per_step']:.2f}"})
    lo = m["lossless"]
    rows.append({"result": f"speculative frames identical to AR ({lo['inner_loop_dtype']})",
                 "this run": f"{lo['frames_identical']:,} / {lo['frames_compared']:,}",
                 "paper (0.6B)": "WER parity only"})
    langs = m["languages"].values()
    rows.append({"result": "PER, mean of languages: original audio / codec round trip / AR / speculative",
                 "this run": " / ".join(f"{mean_present([r.get(k) for r in langs], float('nan')):.2f}"
                                        for k in ("per_gt", "per_codec", "per_ar", "per_spec")),
                 "paper (0.6B)": "WER en {:.2f} / {:.2f} % (AR / spec.)".format(
                     PAPER["table3_languages"]["en"]["ar"]["wer"], PAPER["table3_languages"]["en"]["spec"]["wer"])})
    dep = m.get("deployments")
    if dep:
        e = exact_frames(dep["frames"])
        where = measured_on(dep.get("machine") or m["run"].get("machine"))
        apart = (f"; apart, not lossless: {e['inexact_spec'][0]} {e['inexact_spec'][1]:.2f}x"
                 if e["inexact_spec"] else "")
        rows.append({"result": f"miniature, whole frames: fastest lossless speculative / fastest lossless AR loop "
                               f"({where})",
                     "this run": f"{e['spec_over_ar']:.2f}x ({e['fastest_spec']} / {e['fastest_ar']}){apart}",
                     "paper (0.6B)": "-"})
    fs = m.get("full_size")
    if fs and fs.get("fastest_spec"):
        where = measured_on(fs.get("machine") or m["run"].get("machine"))
        spec = fs["systems"][fs["fastest_spec"]]
        rows.append({"result": f"miniature at the real code predictor's size, whole frames: fastest lossless speculative"
                               f" / fastest AR loop of any deployment ({where})",
                     "this run": f"{fs['speedup']:.2f}x measured ({fs['fastest_spec']} / {fs['fastest_ar']}) at "
                                 f"{spec['tokens_per_step']:.2f} tokens/step{spread_words(fs)}",
                     "paper (0.6B)": "-"})
        formula = fs.get("formula", {}).get(spec["deployment"], {}).get(str(spec["n"]))
        if formula:
            rows.append({"result": "the same deployment and N through Figure 4's formula on our own calls: tokens/step "
                                   f"/ (verify call / AR call), each call timed alone ({where})",
                         "this run": f"{formula['speedup']:.2f}x by the formula ({formula['tokens_per_step']:.2f} / "
                                     f"{formula['call_over_ar']:.3f})",
                         "paper (0.6B)": paper_speedup()})
        if fs.get("speedup_any"):
            peers = fs["peers"]
            best = fs["fastest_ar_any"]
            rows.append({"result": "the same, against the fastest AR loop of any engine, the peers a CPU user would "
                                   f"run included (a peer's frame: 15 of its AR calls; {where})",
                         "this run": f"{fs['speedup_any']:.2f}x measured ({fs['fastest_spec']} / {best}); cheapest "
                                     f"AR call: ours {min(c['ar_ms'] for c in fs['calls'].values()):.2f} ms, "
                                     f"peers' {min(r['ar_step_ms'] for r in peers.values()):.2f} ms, read floor "
                                     f"{fs['floors']['int8']:.2f} ms", "paper (0.6B)": "-"})
    for device, lat in m.get("latency", {}).items():
        if lat.get("32", {}).get("measured_speedup"):
            where = measured_on(lat.get("machine") or m["run"].get("machine"))
            rows.append({"result": f"miniature, measured speedup at the paper's N = 32 ({lat.get('dtype')}, eager; {where})",
                         "this run": f"{lat['32']['measured_speedup']:.2f}x at {lat['32']['tokens_per_step']:.2f} "
                                     "tokens/step", "paper (0.6B)": paper_speedup()})
    f4 = m.get("figure4_cpu")
    if f4:
        p = projection_at(f4["grid"], PAPER_N)
        where, best = measured_on(f4.get("environment")), p["rows"][p["best"]]
        m3 = PAPER["figure4_latency"]["devices"]["macbook_m3_pro"]
        rows.append({"result": f"0.6B shape: projected speedup at N = {p['n']} ({tokens_label(p)}), against the "
                               f"fastest AR call of the same grid ({where})",
                     "this run": f"{best['over_fastest_exact_ar']:.2f}x projected ({p['best']} call / "
                                 f"{p['baseline'][0]} AR call)",
                     "paper (0.6B)": paper_speedup()})
        by_n = {int(k): v for k, v in f4["grid"][p["best"]]["by_n"].items()}
        if 16 in by_n and 32 in by_n:
            rows.append({"result": f"0.6B shape: verify overhead at N = 16 / 32, {p['best']} ({where})",
                         "this run": f"{by_n[16]['overhead']:+.2f} / {by_n[32]['overhead']:+.2f}",
                         "paper (0.6B)": "{:+.3f} at N = 32 (M3 Pro)".format(m3["overhead_at_N32"])})
    return rows


def gpu_results_rows(gpu: dict) -> list[dict]:
    """The GPU reference's headline rows (`helpers.report.gpu_reference.gpu_summary`), labelled with its machine."""
    s, where = gpu_summary(gpu), gpu_label(gpu)
    m3 = PAPER["figure4_latency"]["devices"]["macbook_m3_pro"]
    return [{"result": f"GPU, miniature, whole frames: fastest speculative / fastest AR loop ({where})",
             "this run": f"{s['speedup']:.2f}x ({s['fastest_spec']} / {s['fastest_ar']}) at {s['tokens_per_step']:.2f} "
                         "tokens/step", "paper (0.6B)": "-"},
            {"result": f"GPU, 0.6B shape, N = 32: verify call / round, in AR steps (the call with its sampling and KV "
                       f"commit); projected speedup with the paper's "
                       f"tokens/step {PAPER['figure4_latency']['acceptance_ceiling'][32]:.2f} (inferred) ({where})",
             "this run": f"{s['real_verify_over_ar']:.2f} / {s['real_round_over_ar']:.2f}; {s['real_projected']:.2f}x "
                         f"({s['real_mode']}), {s['real_projected_vs_fastest']:.2f}x over the fastest AR step "
                         f"({s['real_fastest_ar_mode']})",
             "paper (0.6B)": "{:.3f} verify (M3 Pro); {}".format(1 + m3["overhead_at_N32"], paper_speedup())}]


def results_block(run_dir: str | Path, gpu_reference: str | Path = GPU_REFERENCE) -> str:
    """The block from the run's metrics.json and, where it exists, the committed GPU reference."""
    m = json.loads((Path(run_dir) / "metrics.json").read_text())
    gpu = load_gpu_reference(gpu_reference)
    return "\n".join([BEGIN, markdown(results_rows(m) + (gpu_results_rows(gpu) if gpu else [])), END])


def replace_block(text: str, block: str) -> str:
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"the README must hold one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN)
    return head + block + rest.split(END, 1)[1]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="The README's results table from a run's metrics.json")
    ap.add_argument("run_dir", nargs="?", default="outputs/mini-reference")
    ap.add_argument("--write", metavar="README", help="replace the block in this file instead of printing it")
    args = ap.parse_args(argv)
    block = results_block(args.run_dir)
    if args.write:
        path = Path(args.write)
        path.write_text(replace_block(path.read_text(), block))
    else:
        print(block)


if __name__ == "__main__":
    main()
