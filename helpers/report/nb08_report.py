"""Notebook 08 (report): `outputs/<run>/report.md`, the run's tables next to the paper's numbers, opened by what
this run shows, what the paper shows and why they differ (`nb08_summary`), and closed by the paper against this run
(`nb08_comparison`). The README's results block, from the same metrics.json: `helpers.report.readme_results`.

Everything comes from the run folder: metrics.json (the run's parameters are its `run.params`) and figures/. Every
sentence is built from the run's own numbers (`m`), so that no re-run with other params can leave a wrong claim
standing, and says nothing about a section the run did not measure.

    write_report(run_dir)                                     # report.md
"""

from __future__ import annotations

from pathlib import Path

from helpers.artifacts import atomic_write, load_json
from helpers.measure.full_size_frames import full_size_rows
from helpers.measure.machine import measured_on
from helpers.report.deployments import deployments_report_lines
from helpers.report.drafter_ablation import main_drafter_line, table2_row
from helpers.report.full_size import full_size_md
from helpers.report.latency_sweep import COLUMNS as LATENCY_COLUMNS, best_n_sentence, measured_against_realised
from helpers.report.legacy_metrics import legacy_keys_renamed
from helpers.report.losslessness import lossless_lines
from helpers.report.nb08_comparison import comparison_rows
from helpers.report.nb08_summary import summary_lines
from helpers.report.paper import PAPER, ceiling_text
from helpers.report.projection import figure4_report_lines
from helpers.report.quality_parity import parity_lines, silent_wer_sentence
from helpers.report.tables import markdown


TABLE1 = ("stage", "dataset", "language", "samples", "hours", "frames")


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
    out += figure4_report_lines(m) + deployments_report_lines(m)
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
    work = over["draft"] + over["walk"] + over["commit"]
    return [f"Where the time goes at N = {best}: an AR step {ar['per_call_ms']:.3f} ms, a round "
            f"{r['per_call_ms']:.3f} ms (layers {over['layers']:+.3f}, heads {over['heads']:+.3f}, "
            f"sampling {over['sample']:+.3f}, drafts, walk and commit {work:+.3f}): AR step / round {r['ratio']:.2f}; "
            f"{r['ratio_free_host']:.2f} if sampling, walk, commit and drafts cost no more than in an AR step, "
            f"{r['ratio_verify_only']:.2f} if the drafts were free too.",
            ""]


def write_report(run_dir: str | Path) -> str:
    """Write <run_dir>/report.md from <run_dir>/metrics.json; returns its text."""
    run_dir = Path(run_dir)
    text = "\n".join(sections(run_dir, legacy_keys_renamed(load_json(run_dir / "metrics.json"))))
    atomic_write(run_dir / "report.md", lambda p: p.write_text(text))
    return text
