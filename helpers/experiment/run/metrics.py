"""`outputs/<run>/metrics.json`: every notebook merges its section in; the runner adds `run`.

Sections (dotted keys):
    run.{params, seeds, versions, device, git_revision, runner, wall_s.<notebook>}
                            (runner: whether `python -m helpers` ran the notebooks, and timed them in wall_s;
                            false: a notebook run outside it, in JupyterLab, last wrote `run`)
    data.table                                              (Table 1 rows)
    codec_levels, codec_levels_per.{levels, per.<code>, mean}   (mini: each codec level's statistics, and the round
                            trip's PER with the first k levels: `helpers.experiment.stages.codec_round_trip`)
    drafters.<reused|offsets|offsets_prenorm|medusa>.{tokens_per_step, added_params, ...}
    main_drafter.{name, why, expected_tokens_per_step}      (`stages.main_drafter_choice`: chosen on calibration data)
    languages.<code>.{tokens_per_step_ar, tokens_per_step_spec, per_gt, per_codec, per_ar, per_spec, per_ar_std,
                      per_spec_std, wer_codec, wer_ar, wer_spec, parity_p}
                            (per_* null without a phoneme recogniser, wer_* without an ASR; AR and speculative from
                            independent random streams, mean and std over the WER seeds; WER
                            from the first seed only where PER scores the language, std null)
    parity.{p_values, samples, alpha, p_min_adjusted, rejected, design_effect, control.{...}, control_temperature}
                            (`helpers.method.parity.run_parity`: AR vs speculative runs;
                            control: vs AR's c1..c15 redrawn at 1.2)
    tree.<N>.{expected_tokens_per_step, measured_tokens_per_step}
    lossless.{frames_compared, frames_identical, identical_fraction, first_difference, onset, exact, inner_loop_dtype,
              parity.{p_values, samples, alpha, p_min_adjusted, rejected}}      (`helpers.method.parity`)
    latency.<device>.<N>.{call_ms_p50, overhead, tokens_per_step, realised_speedup, measured_speedup}
    latency.<device>.profile                                (`profile.round_profile`: where a round's time goes)
"""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from helpers.artifacts import load_json, save_json
from helpers.experiment.run.pool import available_cores, worker_count
from helpers.report.legacy_metrics import legacy_keys_renamed
from helpers.experiment.run.params import REPO_ROOT, RunParams
from helpers.measure.machine import machine

PACKAGES = ("torch", "transformers", "qwen-tts", "papermill", "coremltools", "jiwer", "numpy")


def json_keys(value):
    """`value` with every dict key a string, as JSON gives it back (tree sizes 4 -> "4"), so that a section merges
    with what a previous run of the notebook wrote."""
    if isinstance(value, dict):
        return {str(k): json_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_keys(v) for v in value]
    return value


def _merge(into: dict, update: dict) -> dict:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def metrics_path(P: RunParams) -> Path:
    return P.run_dir / "metrics.json"


def load_metrics(P: RunParams) -> dict:
    path = metrics_path(P)
    return legacy_keys_renamed(load_json(path)) if path.exists() else {}


def update_metrics(P: RunParams, section: dict) -> dict:
    """Deep-merge `section` into metrics.json (written atomically); returns the whole document.

    Keys are strings in JSON (tree sizes become str(N)), in the section as in the file."""
    metrics = _merge(load_metrics(P), json_keys(section))
    save_json(metrics_path(P), metrics)
    return metrics


def run_info(P: RunParams) -> dict:
    """Params, seeds, package versions, device and git revision of this run."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        revision, dirty = None, None
    info = machine()
    device = torch.cuda.get_device_name(0) if P.device == "cuda" and torch.cuda.is_available() else info["cpu_model"]
    return {"params": P.to_dict(), "seeds": {"base": P.seed, "wer_seeds": P.wer_seeds}, "machine": info,
            "versions": versions, "python": platform.python_version(), "device": f"{P.device}: {device}",
            "cpu_threads": torch.get_num_threads(), "cpu_cores": available_cores(),
            "workers": worker_count(P, available_cores()), "git_revision": revision, "git_dirty": dirty}


def required_keys(P: RunParams) -> list[str]:
    """The dotted keys a complete run of notebooks 00-05 must have written."""
    keys = ["run.params", "run.seeds", "run.versions", "run.device", "run.git_revision", "run.wall_s",
            "lossless.frames_compared", "lossless.frames_identical", "lossless.identical_fraction", "lossless.exact",
            "lossless.parity.p_min_adjusted", "data.table", "main_drafter.name", "main_drafter.why"]
    keys += [f"drafters.{k}.{f}" for k in P.drafters for f in ("tokens_per_step", "added_params")]
    keys += [f"languages.{c}.{f}" for c in P.languages
             for f in ("tokens_per_step_ar", "tokens_per_step_spec", "per_ar", "per_spec", "wer_ar", "wer_spec")]
    keys += ["parity.rejected", "parity.control.rejected"]
    keys += [f"tree.{n}.{f}" for n in P.tree_sizes for f in ("expected_tokens_per_step", "measured_tokens_per_step")]
    return keys


def run_problems(P: RunParams, metrics: dict) -> list[str]:
    """What keeps a run from being complete (notebook 08 stops on any): a required key missing; in exact mode
    (float64 inner loop) any AR vs speculative frame that differs, in evaluation or replay; in deployment mode (an
    inexact inner loop) a same-seed parity test that rejects equal code distributions; in either, an
    independent-stream parity test that rejects, or its control (another temperature) that does not. Notebooks run
    outside the runner (`run.runner` false) have no wall times to lack."""
    keys = required_keys(P)
    if metrics.get("run", {}).get("runner") is False:
        keys.remove("run.wall_s")
    problems = [f"metrics.json lacks {k}" for k in missing_keys(metrics, keys)]
    parity = metrics.get("parity", {})
    if parity.get("rejected"):
        problems.append(f"the parity test rejects equal code distributions of AR and speculative runs from "
                        f"independent streams (adjusted p {parity['p_min_adjusted']:.3g})")
    if parity.get("control", {}).get("rejected") is False:
        problems.append(f"the parity test's control (temperature {parity.get('control_temperature')}) is not "
                        f"rejected (adjusted p {parity['control']['p_min_adjusted']:.3g}): the test cannot tell "
                        "distributions apart at this sample size")
    lossless = metrics.get("lossless", {})
    if "frames_compared" not in lossless:
        return problems
    if lossless.get("exact"):
        if lossless["frames_identical"] != lossless["frames_compared"]:
            problems.append(f"exact mode, yet only {lossless['frames_identical']} of {lossless['frames_compared']} "
                            "evaluation frames are identical between AR and speculative decoding")
        if lossless.get("replay_mismatched"):
            problems.append(f"exact mode, yet the replay differs from the recorded AR run on "
                            f"{lossless['replay_mismatched']} frames")
    elif lossless.get("parity", {}).get("rejected"):
        problems.append(f"the parity test rejects equal code distributions of AR and speculative decoding "
                        f"(adjusted p {lossless['parity']['p_min_adjusted']:.3g})")
    return problems


def missing_keys(metrics: dict, keys: list[str]) -> list[str]:
    """The dotted keys absent from `metrics` (a present key may hold null)."""
    missing = []
    for key in keys:
        node = metrics
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(key)
                break
            node = node[part]
    return missing
