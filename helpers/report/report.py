"""`outputs/<run>/report.md`: the run's tables next to the paper's numbers (`paper_numbers.yaml` beside this file).

Everything comes from the run folder: metrics.json (the run's parameters are its `run.params`) and figures/.
"""

from __future__ import annotations

from pathlib import Path

from helpers.artifacts import atomic_write, load_json
from helpers.report import cpu_figure4
from helpers.measure.full_size_frames import full_size_rows
from helpers.report.full_size import full_size_md
from helpers.report.projection import ceiling_text
from helpers.report.speed_sentences import best_n_sentence, measured_against_realised
from helpers.measure.machine import measured_on
from helpers.report.comparison import comparison_rows
from helpers.report.latency_metrics import COLUMNS as LATENCY_COLUMNS
from helpers.report.paper import PAPER, PAPER_DRAFTERS
from helpers.report.summary import summary_lines
from helpers.report.tables import markdown

__all__ = ["PAPER", "PAPER_DRAFTERS", "table2_row", "main_drafter_line", "sections", "write_report", "lossless_lines", "legacy_keys_renamed"]


def table2_row(kind: str, added_params, tokens_per_step, expected, tree_size) -> dict:
    """One row of Table 2 (drafter ablation): this run's numbers beside the paper's, which only its drafters have."""
    p = PAPER["table2_drafters"][PAPER_DRAFTERS[kind]] if kind in PAPER_DRAFTERS else None
    return {"drafter": kind, "added params": added_params, f"tokens/step (N={tree_size})": tokens_per_step,
            "expected": expected, "paper tokens/step": p and p["tokens_per_step"],
            "paper added params": p and int(float(p["added_params"]))}


def main_drafter_line(choice: dict) -> str:
    """The main drafter and why (metrics' `main_drafter`: `stages.main_drafter_choice`), in one sentence."""
    return f"Main drafter (Table 3, losslessness, WER): **{choice['name']}**: {choice['why']}."


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


def parity_lines(par: dict | None) -> list[str]:
    """The independent-stream parity test and its control in words (metrics' `parity` section)."""
    if not par:
        return []
    control = par.get("control", {})
    return ["", f"Parity in distribution (AR {par['samples'][0]:,} vs speculative {par['samples'][1]:,} frames from "
            f"independent streams): adjusted p {par['p_min_adjusted']:.3g}, "
            f"{'the distributions DIFFER' if par['rejected'] else 'no difference'} at alpha = {par['alpha']:g}. "
            f"Control, speculative vs the AR frames with c1..c15 redrawn at temperature "
            f"{par.get('control_temperature')}: adjusted p "
            f"{control.get('p_min_adjusted', float('nan')):.3g}, "
            f"{'rejected, as it must be' if control.get('rejected') else 'NOT rejected: the test lacks power'}."]


REPORT_NOTEBOOK = "08_report"          # writes this report while it runs: its own wall time is not known yet


def wall_time_line(wall_s: dict[str, float]) -> str:
    """The notebooks' wall times from metrics.json (notebook -> s), the report's own left out: it is recorded only
    after the report is written, so any value here would be an earlier run's."""
    shown = {k: v for k, v in wall_s.items() if k != REPORT_NOTEBOOK}
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
                "runs (`run_parity`).", *parity_lines(m.get("parity")), ""]
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
    out += cpu_figure4.report_lines(m)
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


def lossless_lines(lo: dict, talker_dtype: str | None = None) -> list[str]:
    """AR vs speculative codes in words: frames identical and, where not all are, where they first differ and the
    per-position parity test. lo: metrics' `lossless` section (`FrameComparison.to_dict()`, "exact",
    "inner_loop_dtype", "parity": `CodeParity.to_dict()`)."""
    identical = lo["frames_identical"] == lo["frames_compared"]
    mode = {True: "exact mode: every frame must be identical", False: "deployment mode: identical on most frames, "
            "equal in distribution", None: "mode not recorded"}[lo.get("exact")]
    lines = [f"Inner loop in {lo.get('inner_loop_dtype', '?')} beside a {talker_dtype or '?'} talker ({mode}). "
             f"Speculative vs AR codes from the same seeds: **{lo['frames_identical']:,} of {lo['frames_compared']:,} "
             f"frames identical** ({lo.get('identical_fraction', lo['frames_identical'] / max(lo['frames_compared'], 1)):.2%}"
             f"{', full equality' if identical else ', NOT all identical'})."]
    if not identical and "first_difference" in lo:
        first = {i: c for i, c in enumerate(lo["first_difference"]) if c}
        onset = {i: c for i, c in enumerate(lo["onset"]) if c}
        lines += ["", f"First code position where a differing frame differs (position: frames): {first}; in each "
                  f"utterance's first differing frame (where the trajectories part): {onset}."]
    par = lo.get("parity")
    if par and lo.get("exact") and identical:        # identical streams: p = 1 by construction, a test that cannot fail
        lines += ["", "No per-position chi-square here: on identical code streams it gives p = 1 by construction and "
                  "cannot fail. In exact mode the test is the equality above, frame for frame."]
    elif par:
        worst = min(range(len(par["p_values"])), key=par["p_values"].__getitem__)
        verdict = "the code distributions DIFFER" if par["rejected"] else "no difference in distribution"
        lines += ["", f"Parity test per code position (two-sample chi-square on the code histograms, AR {par['samples'][0]:,} "
                  f"vs speculative {par['samples'][1]:,} frames): smallest p {par['p_values'][worst]:.3g} at position "
                  f"{worst}, Bonferroni-adjusted {par['p_min_adjusted']:.3g}: {verdict} at alpha = {par['alpha']:g}.",
                  "", "p per position: " + ", ".join(f"{p:.2g}" for p in par["p_values"]) + "."]
    return lines


def replay_line(decoded: dict[str, dict[int, int]], frames: int, exact: bool) -> str:
    """How Table 2 and the tree sweep counted their calls (`stages.replayed`): decoded: frames decoded again per
    drafter and N, frames: the evaluation frames."""
    counts = sorted({v for by_n in decoded.values() for v in by_n.values()})
    configs = sum(len(by_n) for by_n in decoded.values())
    if not exact:
        return (f"Table 2 and the tree sweep decode all {frames:,} recorded frames again for each of the {configs} "
                f"configurations (drafter, N) with the run's uniforms; a frame whose codes differ from the recorded "
                f"one is counted, and its calls count.")
    return (f"Table 2 and the tree sweep count the calls of {configs} configurations (drafter, N) on all {frames:,} "
            f"frames by walking the decoder's own plans over the recorded codes: in exact mode every code the decoder "
            f"samples on its accepted path is the recorded one, so a round accepts the longest path of its tree whose "
            f"drafts are the recorded codes. To check the walk, every configuration was also decoded in full on "
            f"{' / '.join(f'{c:,}' for c in counts)} frames (the first utterance of each language): the same calls, "
            f"frame for frame, and the same codes.")


def _speed_lines(by_n: dict) -> list[str]:
    """The sweep in words (`speed_sentences`): where whole frames beat the call's growth, why the best N."""
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
