"""Notebook 08 (report) and the README's results: `outputs/<run>/report.md`, the run's tables next to the paper's
numbers, opened by what this run shows, what the paper shows and why they differ, and closed by the paper against
this run; and the README's results block, from the same metrics.json (and the committed GPU reference).

Everything comes from the run folder: metrics.json (the run's parameters are its `run.params`) and figures/. Every
sentence is built from the run's own numbers (`m`), so that no re-run with other params can leave a wrong claim
standing, and says nothing about a section the run did not measure.

    write_report(run_dir)                                     # report.md
    python -m helpers.report.nb08_report [outputs/mini-reference] [--write README.md]

The second prints the README's results block (between `<!-- results:begin -->` and `<!-- results:end -->`), or
replaces that block in the README; tests/test_readme.py checks the README's block equals the one generated from the
reference run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean

from helpers.artifacts import atomic_write, load_json
from helpers.measure.full_size_frames import full_size_rows, spread_words
from helpers.measure.machine import machine_name, measured_on
from helpers.method.diagnostics import share_closed
from helpers.method.drafters import OFFSET_KINDS
from helpers.report.nb03_tree import IDEAL_REFERENCE
from helpers.report.nb04_decoding import lossless_lines, main_drafter_line, table2_row
from helpers.report.nb05_quality import mean_present, parity_gap, parity_lines, silent_wer_sentence
from helpers.report.nb06_latency import (COLUMNS as LATENCY_COLUMNS, GPU_REFERENCE, PAPER_N, best_n_sentence,
                                         call_cost, call_cost_sentence, exact_frames, figure4_report_lines,
                                         full_size_md, gpu_label, gpu_summary, load_gpu_reference,
                                         measured_against_realised, projection_at, tokens_label)
from helpers.report.paper import PAPER_DEVICES, DRAFTER_NAMES, PAPER, PAPER_DRAFTERS, ceiling_text, paper_speedup
from helpers.report.tables import markdown


TABLE1 = ("stage", "dataset", "language", "samples", "hours", "frames")


def legacy_keys_renamed(metrics):
    """metrics.json written before tokens/step had one name (`toks_per_step`) read with today's keys."""
    if isinstance(metrics, dict):
        return {k.replace("toks_per_step", "tokens_per_step"): legacy_keys_renamed(v) for k, v in metrics.items()}
    return [legacy_keys_renamed(v) for v in metrics] if isinstance(metrics, list) else metrics


def _paper_error(row: dict, system: str) -> float | None:
    return row[system].get("wer", row[system].get("cer"))


def _percent(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _pm(row: dict, key: str) -> str | None:
    """'mean ± std' in percent of a metric over seeds (row[key], row[key + "_std"]; the mean alone where one seed
    gave no std), None if absent."""
    mean, std = row.get(key), row.get(f"{key}_std")
    if mean is None:
        return None
    return f"{100 * mean:.1f}" if std is None else f"{100 * mean:.1f} ± {100 * std:.1f}"


REPORT_NOTEBOOK = "08_report"          # writes this report while it runs: its own wall time is not known yet


def wall_time_line(wall_s: dict[str, float]) -> str:
    """The notebooks' wall times from metrics.json (notebook -> s), the report's own left out: it is recorded only
    after the report is written, so any value here would be an earlier run's."""
    shown = {k: v for k, v in wall_s.items() if k != REPORT_NOTEBOOK}
    if not shown:
        return "Wall time per notebook: not recorded (the notebooks ran outside the runner, `python -m helpers`)."
    return ("Wall time per notebook (s): " + ", ".join(f"{k} {v}" for k, v in shown.items())
            + f" ({REPORT_NOTEBOOK}, which writes this report, is timed after it: see metrics.json).")


def sections(run_dir: Path, m: dict) -> list[str]:
    """The report's Markdown lines from a run's metrics `m` (its parameters: m["run"]["params"])."""
    run = m.get("run", {})
    P = run.get("params", {})
    out = [f"# Report: run `{P.get('run_name')}` (backend `{P.get('backend')}`)", "",
           f"Git revision `{run.get('git_revision')}`{' (uncommitted changes)' if run.get('git_dirty') else ''}, "
           f"device {run.get('device')}, seed {P.get('seed')}. " + wall_time_line(run.get("wall_s", {})), ""]
    out += summary_lines(m)
    if "data" in m:
        ours = [{k: row[k] for k in TABLE1} for row in m["data"]["table"]]
        paper = [dict(zip(TABLE1, r[:5] + [float(r[5])])) for r in PAPER["table1_datasets"]]
        out += ["## Table 1: data", "", "This run:", "", markdown(ours), "", "Paper:", "",
                markdown(paper), ""]
    if "drafters" in m:
        rows = [table2_row(kind, d.get("added_params"), d.get("tokens_per_step"), d.get("expected_tokens_per_step"),
                           P.get("tree_size"))
                for kind in P.get("drafters", m["drafters"]) if (d := m["drafters"].get(kind)) is not None]
        out += ["## Table 2: drafter ablation", "", markdown(rows), "",
                "Added parameters are this backend's; the paper's are on the 0.6B model (offsets: K x 1024). "
                "offsets: b_j added after the final norm; offsets_prenorm: before it (the paper has no such row).", ""]
        if "main_drafter" in m:
            out += [main_drafter_line(m["main_drafter"]), ""]
    if "languages" in m:
        rows = []
        for lang, r in m["languages"].items():
            p = PAPER["table3_languages"].get(lang)
            rows.append({"language": lang, "frames": r.get("frames"), "tokens/step AR": r.get("tokens_per_step_ar"),
                         "tokens/step spec": r.get("tokens_per_step_spec"), "PER truth %": _percent(r.get("per_gt")),
                         "PER codec %": _percent(r.get("per_codec")), "PER AR %": _pm(r, "per_ar"),
                         "PER spec %": _pm(r, "per_spec"), "WER AR %": _pm(r, "wer_ar"), "WER spec %": _pm(r, "wer_spec"),
                         "parity p": r.get("parity_p"), "paper spec": p and p["spec"]["tokens_per_step"],
                         "paper WER AR %": p and _paper_error(p, "ar"), "paper WER spec %": p and _paper_error(p, "spec")})
        out += ["## Table 3: per language", "", markdown(rows), "",
                "Error rates in percent, mean ± std over the WER seeds (a value without ± comes from one seed), AR "
                "and speculative synthesis from independent random streams. PER: the phoneme error rate of this "
                "backend's phoneme recogniser (truth: the original audio; codec: its ground-truth codes decoded); WER "
                "where the backend has an ASR (the paper: CER for ja and zh), from the first seed where PER scores the "
                "language; n/a where it has neither. Parity p: Bonferroni-adjusted, per code position, AR vs speculative "
                "runs (`run_parity`).", *wer_caveats(m["languages"]), *parity_lines(m.get("parity")), ""]
    if "tree" in m:
        rows = [{"N": int(n), "expected tokens/step": r.get("expected_tokens_per_step"),
                 "measured tokens/step": r.get("measured_tokens_per_step"), "paper ceiling": ceiling_text(int(n))}
                for n, r in sorted(m["tree"].items(), key=lambda kv: int(kv[0]))]
        out += ["## Tokens/step vs tree size (main drafter)", "", markdown(rows), ""]
    if "lossless" in m:
        out += ["## Losslessness", "", *lossless_lines(m["lossless"], P.get("dtype")), ""]
    if "latency" in m:
        for device, by_n in m["latency"].items():
            rows = [{"N": int(n), **{c: by_n[n].get(c) for c in LATENCY_COLUMNS}}
                    for n in sorted((k for k in by_n if k.isdigit()), key=int)]
            out += [f"## Latency on {device} ({by_n.get('dtype')})", "",
                    measured_on(by_n.get("machine") or run.get("machine")) + ":", "", markdown(rows), "",
                    f"Best N {by_n.get('best_n')}; AR call p50 {by_n.get('ar_call_ms_p50', 0):.3f} ms; whole frame: our AR "
                    f"loop {by_n.get('ar_frame_ms', 0):.2f} ms, official `code_predictor.generate` "
                    f"{by_n.get('official_frame_ms', 0):.2f} ms.", ""] + _speed_lines(by_n) + _profile_lines(by_n)
    if "full_size" in m:
        fs = m["full_size"]
        where = measured_on(fs.get("machine") or run.get("machine"))
        out += ["## The miniature at the real code predictor's size: whole frames, every deployment", "",
                where + ", p50 ms per frame:", "", markdown(full_size_rows(fs)), "", full_size_md(fs, where), ""]
    out += figure4_report_lines(m)
    if "coreml" in m:
        out += ["## Core ML export", "", markdown([{"package": k, **v} for k, v in m["coreml"].items()
                                                   if isinstance(v, dict)]), ""]
    closing = comparison_rows(m)
    if closing:
        out += ["## The paper against this run", "", markdown(closing), ""]
    figures = sorted((run_dir / "figures").glob("*.png")) if (run_dir / "figures").is_dir() else []
    if figures:
        out += ["## Figures", ""] + [f"![{f.stem}](figures/{f.name})" for f in figures] + [""]
    return out


def wer_caveats(languages: dict) -> list[str]:
    """What a WER of Table 3 can say: the languages scored from one seed (a single draw, no spread) and those whose
    ASR reads not even the codec round trip (`silent_wer_sentence`)."""
    one = [lang for lang, r in languages.items() if len(r.get("wer_ar_per_seed") or []) == 1]
    silent = silent_wer_sentence(languages, list(languages))
    lines = [f"WER in {', '.join(one)} comes from one seed: a single draw, with no spread to set a difference "
             "against." if one else None, silent]
    return ["", " ".join(x for x in lines if x)] if any(lines) else []


def _speed_lines(by_n: dict) -> list[str]:
    """The sweep in words (`measured_against_realised`, `best_n_sentence`): where whole frames beat the call's growth, why the best N."""
    sweep = {k: v for k, v in by_n.items() if k.isdigit()}
    if by_n.get("best_n") is None or not any(r.get("measured_speedup") for r in sweep.values()):
        return []
    return [measured_against_realised(sweep) + " " + best_n_sentence(sweep, by_n["best_n"]), ""]


def _profile_lines(by_n: dict) -> list[str]:
    """Where the time of a round goes at the best N (notebook 06's profile), in one paragraph."""
    profile, best = by_n.get("profile"), str(by_n.get("best_n"))
    if not profile or best not in profile["trees"]:
        return []
    ar, r = profile["ar"], profile["trees"][best]
    over = r["over_ar"]
    work = over["query"] + over["walk"] + over["commit"]
    return [f"Where the time goes at N = {best}: an AR step {ar['per_call_ms']:.3f} ms, a round "
            f"{r['per_call_ms']:.3f} ms (layers {over['layers']:+.3f}, heads and drafts {over['heads']:+.3f}, "
            f"sampling {over['sample']:+.3f}, query, walk and commit {work:+.3f}): AR step / round {r['ratio']:.2f}; "
            f"{r['ratio_free_host']:.2f} if sampling, walk, commit and query cost no more than in an AR step, {r['ratio_verify_only']:.2f} if the drafts were free too.",
            ""]


def write_report(run_dir: str | Path) -> str:
    """Write <run_dir>/report.md from <run_dir>/metrics.json; returns its text."""
    run_dir = Path(run_dir)
    text = "\n".join(sections(run_dir, legacy_keys_renamed(load_json(run_dir / "metrics.json"))))
    atomic_write(run_dir / "report.md", lambda p: p.write_text(text))
    return text


REFERENCE_SCORES = ("ideal", "own_ideal_frames")   # scored on a few frames only: not beside the others


MIN_GAP = 0.05          # tokens/call: a smaller reused-to-Medusa gap is too small to split into shares (a chosen threshold)


def _paper_tokens(kind: str) -> float | None:
    key = PAPER_DRAFTERS.get(kind)
    return PAPER["table2_drafters"][key]["tokens_per_step"] if key else None


def drafter_lines(m: dict, tree_size) -> list[str]:
    """Tokens/step per drafter beside the paper's, and how much of the gap the offsets close in each."""
    d = m.get("drafters", {})
    tps = {k: v["tokens_per_step"] for k, v in d.items() if v.get("tokens_per_step") is not None}
    if not tps:
        return []
    ours = ", ".join(f"{k} {v:.2f}" for k, v in tps.items())
    paper = ", ".join(f"{k} {_paper_tokens(k):.2f}" for k in tps if _paper_tokens(k) is not None)
    lines = [f"- **Tokens per call** at N = {tree_size} (free-running evaluation set): this run {ours}; "
             f"the paper {paper}."]
    p = {k: _paper_tokens(k) for k in ("reused", "medusa", "offsets")}
    paper_share = share_closed(p["reused"], p["offsets"], p["medusa"], MIN_GAP)
    if "reused" in tps and "medusa" in tps:
        gap = tps["medusa"] - tps["reused"]
        lines.append(f"- **The positional mismatch**: Medusa heads beat the reused heads by {gap:+.2f} tokens/call "
                     f"here and by {p['medusa'] - p['reused']:+.2f} in the paper (whose offsets close {paper_share:.0%} "
                     "of it). The offsets' share of that gap, by three measures:")
        lines += [f"  - {k}: {measures}" for k in OFFSET_KINDS if k in tps
                  and (measures := _share_measures(m, k, tps))]
    targets = m.get("run", {}).get("params", {}).get("drafter_targets")
    if targets and targets != "codec":
        lines.append(f"- **What the drafters learn differs from the paper's**: here the code predictor's own "
                     f"{'sampling distributions' if targets == 'distributions' else 'draws'} along its draws "
                     "(self-distillation, `drafter_targets: " + targets + "`); the paper trains on the codec's codes.")
    return lines


def _share_measures(m: dict, kind: str, tps: dict) -> str:
    """The share of the reused-to-Medusa gap `kind` closes: in tokens/step (all languages, and its range over
    languages), in validation top-1 and in teacher-forced acceptance (depth 1..K): three estimates, none an interval
    of the others."""
    d = m.get("drafters", {})
    parts = []
    if abs(tps["medusa"] - tps["reused"]) >= MIN_GAP:
        parts.append(f"{share_closed(tps['reused'], tps[kind], tps['medusa']):.0%} of the tokens/step gap")
        by = {k: d[k].get("tokens_per_step_by_language", {}) for k in ("reused", "medusa", kind)}
        langs = [x for x in by[kind] if x in by["reused"] and x in by["medusa"]
                 and abs(by["medusa"][x] - by["reused"][x]) >= MIN_GAP / 2]
        if len(langs) > 1:
            each = [share_closed(by["reused"][x], by[kind][x], by["medusa"][x]) for x in langs]
            parts[-1] += f" ({min(each):.0%} to {max(each):.0%} over {len(langs)} languages)"
    top1 = {k: d[k].get("validation_top1") for k in ("reused", "medusa", kind)}
    if all(top1.values()):
        parts.append("of the validation top-1 gap " + ", ".join(
            f"{share_closed(r, x, q):.0%}" for r, x, q in zip(top1["reused"], top1[kind], top1["medusa"]))
            + " at depths 1..K")
    drafts = m.get("diagnostics", {}).get("drafts", {})
    if all(k in drafts for k in ("reused", "medusa", kind)):
        acc = {k: drafts[k]["acceptance_by_depth"] for k in ("reused", "medusa", kind)}
        parts.append("of the acceptance gap " + ", ".join(
            f"{share_closed(r, x, q):.0%}" for r, x, q in zip(acc["reused"], acc[kind], acc["medusa"])))
    return "; ".join(parts) + "." if parts else ""


def limit_lines(m: dict) -> list[str]:
    """What caps acceptance here: the target's sharpness and the exact-marginal drafter's top-1."""
    lines, target, ceiling = [], m.get("target", {}), m.get("ceiling", {})
    if target.get("top_prob"):
        lines.append(f"- **Why the numbers differ: the target.** A draft is accepted when it equals the code the "
                     f"target samples; the target's most probable code carries on average "
                     f"{mean(target['top_prob']):.2f} of its probability (entropy {mean(target['entropy']):.2f} nats "
                     f"per code position, top-k {m.get('run', {}).get('params', {}).get('top_k')}), so a single draft "
                     "(accepted with the target's probability of it) is accepted at most that often.")
    if ceiling.get("top1"):
        lines.append("- The exact-marginal (ideal) drafter's rank-0 draft is accepted with probability "
                     + ", ".join(f"{a:.2f}" for a in ceiling["top1"]) + f" at depths 1..{len(ceiling['top1'])} (its "
                     "marginal is enumerated and covers " + ", ".join(f"{c:.0%}" for c in ceiling.get("covered", []))
                     + f" of the mass): {IDEAL_REFERENCE}.")
    return lines


def mismatch_lines(m: dict) -> list[str]:
    """The mismatch on teacher-forced validation frames (metrics' `diagnostics`): depth-1 acceptance of the own
    head, the reused heads and each trained drafter, and whether the displacement h_{t+j} - h_t is a translation."""
    diag = m.get("diagnostics", {})
    drafts = diag.get("drafts", {})
    if "own" not in drafts or "reused" not in drafts:
        return []
    order = ["own", "reused"] + sorted(k for k in drafts if k not in ("own", "reused", *REFERENCE_SCORES))
    acc = {k: drafts[k]["acceptance_by_depth"][0] for k in order}
    named = ", ".join(f"{k} {a:.3f}" for k, a in acc.items())
    lines = [f"- **Where the mismatch is** (teacher-forced validation, depth-1 acceptance E[p_target(draft)]): {named}. "
             f"The own head reading its own state is the no-mismatch reference; the reused heads lose "
             f"{acc['own'] - acc['reused']:.3f} to it."]
    tr = diag.get("translation", {})
    if tr:
        shares = "; ".join(f"{k}: " + ", ".join(f"{x:.1%}" for x in v["shared_share"]) for k, v in tr.items())
        lines.append(f"- One shared vector per depth explains this share of the displacement h_(t+j) - h_t "
                     f"(depths 1..{len(next(iter(tr.values()))['shared_share'])}): {shares}. Offsets are such "
                     "shared vectors: they can close the mismatch only as far as it is a translation (after the norm "
                     "an offset is a logit bias; before it, a move of the normed direction).")
    drift = diag.get("tiny_drift", {}).get("loss_gap_closed")
    if isinstance(drift, dict):
        lines.append("- On a controlled tiny model whose drift is known (a translation before the norm, notebook 02) "
                     "the offsets close this share of the own-vs-reused draft cross-entropy gap: "
                     + ", ".join(f"{k} {v:.0%}" for k, v in drift.items()) + ".")
    return lines


def language_lead(offsets: dict[str, float] | None, reused: dict[str, float] | None) -> str:
    """", and the offsets lead the reused heads in 6 of 6 languages (+0.008 to +0.027)": how the offsets' tokens/step
    compare with the reused heads' language by language (each: language -> tokens/step); "" without both."""
    if not offsets or not reused or set(offsets) != set(reused):
        return ""
    margins = [offsets[c] - reused[c] for c in offsets]
    lead = sum(x > 0 for x in margins)
    return (f", and the offsets {'lead' if lead else 'do not lead'} the reused heads in {lead} of {len(margins)} "
            f"languages (margins {min(margins):+.3f} to {max(margins):+.3f}; no run-to-run spread was measured)")


def headline_lines(m: dict) -> list[str]:
    """What the run shows, good and bad, in the README's words: exactness, tokens/step against the paper's, and the
    speed measured (whole frames; at the paper's N = 32), each latency with the machine it was measured on."""
    P, lines = m.get("run", {}).get("params", {}), []
    lo, d = m.get("lossless"), m.get("drafters", {})
    if lo:
        lines.append(f"- Exact: {lo['frames_identical']:,} of {lo['frames_compared']:,} speculative frames equal the "
                     f"AR frames of the same seeds ({lo.get('inner_loop_dtype', 'dtype not recorded')}).")
    if "reused" in d and "offsets" in d:
        n, r, o = P.get("tree_size"), d["reused"]["tokens_per_step"], d["offsets"]["tokens_per_step"]
        med = d.get("medusa", {}).get("tokens_per_step")
        lines.append(f"- Tokens/step at N = {n}: offsets {o:.2f} against the reused heads' {r:.2f} ({o - r:+.2f})"
                     + (f" and Medusa's {med:.2f}" if med else "") + f"; the paper: {_paper_tokens('offsets'):.2f} "
                     f"against {_paper_tokens('reused'):.2f} ({_paper_tokens('offsets') - _paper_tokens('reused'):+.2f}): "
                     + (f"the offsets' gain here is {(o - r) / (_paper_tokens('offsets') - _paper_tokens('reused')):.0%}"
                        " of the paper's" + language_lead(d.get("offsets", {}).get("tokens_per_step_by_language"),
                                                          d.get("reused", {}).get("tokens_per_step_by_language"))
                        + "."))
    machine = m.get("run", {}).get("machine")
    dep = m.get("deployments", {}).get("frames")
    if dep:
        where = measured_on(m["deployments"].get("machine") or machine)
        lines.append(f"- Speed, the miniature's whole frames ({where}): the fastest speculative loop "
                     f"({dep['fastest_spec']}) is {dep['ratios']['spec_over_ar']:.2f}x the fastest AR loop "
                     f"({dep['fastest_ar']}).")
    fs = m.get("full_size")
    if fs and fs.get("fastest_spec"):
        spec = fs["systems"][fs["fastest_spec"]]
        lines.append(f"- Speed at the real code predictor's size ({measured_on(fs.get('machine') or machine)}): the "
                     f"fastest lossless speculative loop ({fs['fastest_spec']}, {spec['tokens_per_step']:.2f} "
                     f"tokens/step) is {fs['speedup']:.2f}x the fastest AR loop of any deployment ({fs['fastest_ar']})"
                     f"{spread_words(fs)}"
                     + (f"; against the fastest AR loop of any engine ({fs['fastest_ar_any']}) {fs['speedup_any']:.2f}x"
                        if fs.get("speedup_any") else "") + ".")
    for device, by_n in m.get("latency", {}).items():
        at32 = by_n.get("32")
        if at32 and at32.get("measured_speedup"):
            x = at32["measured_speedup"]
            lines.append(f"- At the paper's N = 32 the measured speedup on {device} is {x:.2f}x"
                         + (" (below 1: slower than AR)" if x < 1 else "") + f", at {at32['tokens_per_step']:.2f} "
                         f"tokens/step ({measured_on(by_n.get('machine') or machine)}; the best N here: {by_n.get('best_n')}, "
                         f"{by_n[str(by_n.get('best_n'))]['measured_speedup']:.2f}x).")
    return ["**In short:**", "", *lines, ""] if lines else []


def latency_lines(m: dict) -> list[str]:
    """Speedup per device at its best N beside the paper's devices, and the call overhead that explains it."""
    lines = []
    devices = PAPER["figure4_latency"]["devices"]
    for device, by_n in m.get("latency", {}).items():
        best = str(by_n.get("best_n"))
        if best not in by_n:
            continue
        r = by_n[best]
        at32 = by_n.get("32")
        paper = ", ".join(f"{PAPER_DEVICES[name]} {v['speedup_at_N32']:.2f}x (overhead {v['overhead_at_N32']:.3f})"
                          for name, v in devices.items() if "speedup_at_N32" in v and "overhead_at_N32" in v)
        lines.append(f"- **Speed on {device}** ({measured_on(by_n.get('machine') or m.get('run', {}).get('machine'))}): best N = {best}, measured speedup {r['measured_speedup']:.2f}x "
                     f"(call overhead {r['overhead']:.2f} of an AR call)"
                     + (f"; at N = 32 the call costs {call_cost(at32['overhead']):.2f} AR calls" if at32 else "")
                     + f". The paper at N = 32, by Figure 4's formula: {paper}. A round of t tokens/call at a call "
                     "costing 1 + overhead AR "
                     "calls gains t / (1 + overhead): tokens/step turn into speedup only where the wider call is "
                     "nearly free.")
    return lines


def quality_lines(m: dict) -> list[str]:
    """Losslessness and quality parity, as measured."""
    lines, lo = [], m.get("lossless")
    if lo:
        same = lo["frames_identical"] == lo["frames_compared"]
        lines.append(f"- **Losslessness**: {lo['frames_identical']:,} of {lo['frames_compared']:,} frames identical "
                     f"between speculative and AR decoding from the same seeds"
                     + (" (exact, as the proof says)." if same else " (NOT all: see Losslessness below).")
                     + " The paper shows parity in WER; this run shows the codes themselves.")
    pg = parity_gap(m.get("languages", {}))
    if pg:
        langs = {k: m["languages"][k] for k in pg["scored"]}
        gap, spread = pg["gap"], pg["spread"] or 0
        lines.append(f"- **Quality parity** (phoneme error rate, {len(langs)} languages, AR and speculative from "
                     f"independent streams): mean PER AR {mean(v['per_ar'] for v in langs.values()):.1%}, speculative "
                     f"{mean(v['per_spec'] for v in langs.values()):.1%}; the largest per-language gap {gap:.1%} "
                     f"against a seed-to-seed spread of up to {spread:.1%}. The paper: WER parity in six languages.")
    par = m.get("parity")
    if par and "rejected" in par:
        control = par.get("control", {})
        power = (f"is rejected (adjusted p {control['p_min_adjusted']:.3g}), so the test has power"
                 if control.get("rejected") else "is NOT rejected: the test lacks power")
        lines.append(f"- **Parity in distribution** (per code position, AR vs speculative runs): "
                     f"{'REJECTED' if par['rejected'] else 'not rejected'} (adjusted p {par['p_min_adjusted']:.3g}); "
                     f"the control at temperature {par.get('control_temperature')} {power}.")
    return lines


def summary_lines(m: dict) -> list[str]:
    """The section 'What this run shows, what the paper shows, and why they differ'."""
    P = m.get("run", {}).get("params", {})
    body = (headline_lines(m) + quality_lines(m) + drafter_lines(m, P.get("tree_size")) + mismatch_lines(m) + limit_lines(m) + latency_lines(m))
    if not body:
        return []
    return ["## What this run shows, what the paper shows, and why they differ", "",
            f"Backend `{P.get('backend')}` on {m.get('run', {}).get('device')}; the paper: Qwen3-TTS-12Hz-0.6B on "
            "Apple devices.", "", *body, ""]


def _row(result, paper, run, why) -> dict:
    return {"result": result, "paper": paper, "this run": run, "why they differ": why}


def _tokens_rows(m: dict) -> list[dict]:
    P, d = m["run"]["params"], m.get("drafters", {})
    n, rows = P.get("tree_size"), []
    top = mean(m["target"]["top_prob"]) if m.get("target", {}).get("top_prob") else None
    ideal = m.get("ceiling", {}).get("expected_tokens_per_step", {}).get(str(n))
    for kind, key in PAPER_DRAFTERS.items():
        if d.get(kind, {}).get("tokens_per_step") is None:
            continue
        ours, theirs = d[kind]["tokens_per_step"], PAPER["table2_drafters"][key]["tokens_per_step"]
        if ours < theirs:
            why = "a different model and codec" + (
                f": the miniature's code predictor puts on average {top:.2f} of its probability on its most probable "
                "code, so drafts are accepted less often" if top is not None else "")
            if ideal is not None:
                why += f"; the ideal drafter would expect {ideal:.2f} in the same tree (a reference point, not an upper bound on a real drafter)"
        else:
            acc = {k: v["acceptance_by_depth"][0] for k, v in m.get("diagnostics", {}).get("drafts", {}).items()}
            why = ("above the paper's; the real 0.6B model was not run here, so which of its properties the "
                   "difference comes from is not measured" + (
                       f" (on the miniature, depth 1: {kind} accepted with probability {acc[kind]:.2f} against its own "
                       f"head's {acc['own']:.2f})" if "own" in acc and kind in acc else ""))
        rows.append(_row(f"tokens/step, {DRAFTER_NAMES[kind]}, N = {n}",
                         f"{PAPER['table2_drafters'][key]['tokens_per_step']:.2f}",
                         f"{d[kind]['tokens_per_step']:.2f}", why))
    if all(d.get(k, {}).get("tokens_per_step") is not None for k in ("reused", "medusa", "offsets")):
        t = {k: d[k]["tokens_per_step"] for k in ("reused", "medusa", "offsets")}
        p = {k: PAPER["table2_drafters"][PAPER_DRAFTERS[k]]["tokens_per_step"] for k in t}
        shared = m.get("diagnostics", {}).get("translation", {}).get("normed", {}).get("shared_share")
        targets = P.get("drafter_targets")
        why = (f"the gap itself is {t['medusa'] - t['reused']:.2f} here against {p['medusa'] - p['reused']:.2f}"
               + (f"; one shared vector explains at most {max(shared):.1%} of the displacement h_(t+j) - h_t, so "
                  "an offset has little to correct" if shared else "")
               + (f"; the drafters learn the code predictor's own draws ({targets}), the paper's the codec's codes"
                  if targets and targets != "codec" else ""))
        gap = t["medusa"] - t["reused"]
        rows.append(_row("offsets' share of the reused-to-Medusa gap (tokens/step)",
                         f"{(p['offsets'] - p['reused']) / (p['medusa'] - p['reused']):.0%}",
                         f"{(t['offsets'] - t['reused']) / gap:.0%}" if abs(gap) >= MIN_GAP else
                         f"no share: the gap, {gap:+.2f}, is below {MIN_GAP} tokens/step", why))
    return rows


def _quality_rows(m: dict) -> list[dict]:
    rows, lo = [], m.get("lossless")
    if lo:
        rows.append(_row("lossless", "WER parity", f"{lo['frames_identical']:,} / {lo['frames_compared']:,} frames "
                         f"identical ({lo.get('inner_loop_dtype', 'dtype not recorded')})", "the run compares the codes themselves: in float64, "
                         "with each position's uniform shared by both loops, they must be equal"))
    langs = {k: v for k, v in m.get("languages", {}).items() if v.get("per_ar") is not None}
    if langs:
        en = PAPER["table3_languages"]["en"]
        rows.append(_row("error rate, AR / speculative",
                         f"WER en {en['ar']['wer']:.2f} / {en['spec']['wer']:.2f} %",
                         f"PER, mean of {len(langs)} languages {mean(v['per_ar'] for v in langs.values()):.1%} / "
                         f"{mean(v['per_spec'] for v in langs.values()):.1%}",
                         "the miniature's speech is synthetic and scored by its own phoneme recogniser (its codec "
                         f"round trip alone: {mean(v['per_codec'] for v in langs.values()):.1%}); what carries over is "
                         "the parity, not the level"))
    return rows


def _speed_rows(m: dict) -> list[dict]:
    rows, devices = [], PAPER["figure4_latency"]["devices"]
    m3 = devices["macbook_m3_pro"]
    machine = m.get("run", {}).get("machine")
    for device, lat in m.get("latency", {}).items():
        at32 = lat.get("32")
        if at32 and at32.get("measured_speedup"):
            rows.append(_row("measured speedup at N = 32", paper_speedup(),
                             f"{at32['measured_speedup']:.2f}x ({device}, {machine_name(lat.get('machine') or machine)})",
                             call_cost_sentence(at32, 32)))
        if lat.get("best_n") is not None:
            best = lat[str(lat["best_n"])]
            by_n = {k: v for k, v in lat.items() if k.isdigit()}
            rows.append(_row("best N", "32 (iPhone 17 Pro Max, M3 Pro), 16 (iPhone 12)",
                             f"{lat['best_n']} ({best['measured_speedup']:.2f}x)",
                             best_n_sentence(by_n, lat["best_n"])))
    fs = m.get("full_size")
    if fs and fs.get("fastest_spec"):
        spec = fs["systems"][fs["fastest_spec"]]
        rows.append(_row("whole frames at the real code predictor's size: fastest lossless speculative / fastest AR "
                         "loop", "- (the paper times no whole frame; its speedups are Figure 4's formula)",
                         f"{fs['speedup']:.2f}x measured ({fs['fastest_spec']} / {fs['fastest_ar']}; "
                         f"{machine_name(fs.get('machine') or machine)})",
                         f"{spec['tokens_per_step']:.2f} tokens/step, the miniature's codec's cap, against the "
                         "paper's 2.47; the frames are real, the weights the trained miniature's embedded at the real "
                         "shape, on a CPU rather than the Neural Engine"))
    f4 = m.get("figure4_cpu")
    if f4:
        p = projection_at(f4["grid"], PAPER_N)
        base, _ = p["baseline"]
        rows.append(_row(f"0.6B shape: projected speedup at N = {p['n']}, against the fastest AR call of the grid",
                         paper_speedup(),
                         f"{p['rows'][p['best']]['over_fastest_exact_ar']:.2f}x projected ({p['best']} / {base}; "
                         f"{machine_name(f4.get('environment'))})",
                         f"{tokens_label(p)} over this CPU's measured call: a verify call of {p['n'] + 1} tokens "
                         f"costs {p['rows'][p['best']]['call_ms'] / f4['grid'][p['best']]['ar_ms']:.2f} of its own "
                         f"AR calls here, {1 + m3['overhead_at_N32']:.3f} on the M3 Pro's Neural Engine; the "
                         "AR baseline is the grid's fastest AR call"))
    return rows


def comparison_rows(m: dict) -> list[dict]:
    """Paper against this run, one row per result the run measured (tokens/step, the offsets' share, losslessness,
    error rates, speed), each with the reason they differ."""
    if "run" not in m or "params" not in m["run"]:
        return []
    return _tokens_rows(m) + _quality_rows(m) + _speed_rows(m)


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
                                   f"run included (a peer's frame: 15 of its AR steps; {where})",
                         "this run": f"{fs['speedup_any']:.2f}x measured ({fs['fastest_spec']} / {best}); cheapest "
                                     f"AR step: ours {min(c['ar_ms'] for c in fs['calls'].values()):.2f} ms, "
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
    """The GPU reference's headline rows (`helpers.report.nb06_latency.gpu_summary`), labelled with its machine."""
    s, where = gpu_summary(gpu), gpu_label(gpu)
    m3 = PAPER["figure4_latency"]["devices"]["macbook_m3_pro"]
    return [{"result": f"GPU, miniature, whole frames: fastest speculative / fastest AR loop ({where})",
             "this run": f"{s['speedup']:.2f}x ({s['fastest_spec']} / {s['fastest_ar']}) at {s['tokens_per_step']:.2f} "
                         "tokens/step", "paper (0.6B)": "-"},
            {"result": f"GPU, 0.6B shape, N = 32: verify call / round, in AR calls; projected speedup with the paper's "
                       f"tokens/step {PAPER['figure4_latency']['acceptance_ceiling'][32]:.2f} (inferred) ({where})",
             "this run": f"{s['real_verify_over_ar']:.2f} / {s['real_round_over_ar']:.2f}; {s['real_projected']:.2f}x "
                         f"({s['real_mode']}), {s['real_projected_vs_fastest']:.2f}x over the fastest AR call "
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
