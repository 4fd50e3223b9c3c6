"""report.md's opening section, "What this run shows, what the paper shows, and why they differ": the headline in
the README's words, losslessness and quality parity, tokens/step per drafter and the offsets' share of the
reused-to-Medusa gap, what caps acceptance (`helpers.report.acceptance_limits`) and the speed per device, each
sentence from the run's own metrics (`m`).
"""

from __future__ import annotations

from statistics import mean

from helpers.measure.full_size_frames import spread_words
from helpers.measure.machine import measured_on
from helpers.method.diagnostics import share_closed
from helpers.method.drafters import OFFSET_KINDS
from helpers.report.acceptance_limits import limit_lines, mismatch_lines
from helpers.report.latency_sweep import call_cost
from helpers.report.paper import PAPER, PAPER_DEVICES, PAPER_DRAFTERS
from helpers.report.quality_parity import parity_gap


def summary_lines(m: dict) -> list[str]:
    """The section 'What this run shows, what the paper shows, and why they differ'."""
    P = m.get("run", {}).get("params", {})
    body = (headline_lines(m) + quality_lines(m) + drafter_lines(m, P.get("tree_size")) + mismatch_lines(m) + limit_lines(m) + latency_lines(m))
    if not body:
        return []
    return ["## What this run shows, what the paper shows, and why they differ", "",
            f"Backend `{P.get('backend')}` on {m.get('run', {}).get('device')}; the paper: Qwen3-TTS-12Hz-0.6B on "
            "Apple devices.", "", *body, ""]


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


def language_lead(offsets: dict[str, float] | None, reused: dict[str, float] | None) -> str:
    """", and the offsets lead the reused heads in 6 of 6 languages (+0.008 to +0.027)": how the offsets' tokens/step
    compare with the reused heads' language by language (each: language -> tokens/step); "" without both."""
    if not offsets or not reused or set(offsets) != set(reused):
        return ""
    margins = [offsets[c] - reused[c] for c in offsets]
    lead = sum(x > 0 for x in margins)
    return (f", and the offsets {'lead' if lead else 'do not lead'} the reused heads in {lead} of {len(margins)} "
            f"languages (margins {min(margins):+.3f} to {max(margins):+.3f}; no run-to-run spread was measured)")


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
