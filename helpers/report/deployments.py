"""The miniature in every CPU deployment (notebook 06, report.md, the README): each deployment's call and where its
time goes, and whole frames per deployment (`helpers.measure.deployments.deployment_frames`' dict: {"frames",
"systems": {"ar@<deployment>" | "spec<N>@<deployment>" | "official...": {"frame_ms", "tokens_per_step", ...}},
"identical": {deployment: {"spec": {N: frames equal to its AR frames}}}, ...}), as tables and sentences; a
speculative loop counts as lossless only where its frames were measured equal to its own AR loop's.
"""

from __future__ import annotations

from helpers.measure.deployments import spread, spread_text
from helpers.measure.machine import measured_on
from helpers.report.tables import markdown


def identical_frames(frames: dict, system: str) -> int | None:
    """How many of a speculative system's frames ("spec<N>@<deployment>") equal its deployment's own AR frames; None
    for any other system."""
    if not system.startswith("spec") or "+" in system:
        return None
    n, name = system.split("@")
    same = frames["identical"][name]["spec"]
    return same.get(int(n[4:]), same.get(n[4:]))


def frames_rows(frames: dict) -> list[dict]:
    """`measure.deployments.deployment_frames`'s systems as table rows, fastest first; a speculative loop's frames
    equal to its own AR loop's (same uniforms), counted."""
    def identical(k):
        same = identical_frames(frames, k)
        return "-" if same is None else f"{same}/{frames['frames']}"
    return [{"system": k, "frame ms": round(v["frame_ms"], 3), "tokens/step": v["tokens_per_step"],
             "identical to its AR": identical(k)}
            for k, v in sorted(frames["systems"].items(), key=lambda kv: kv[1]["frame_ms"])]


def exact_frames(frames: dict) -> dict:
    """The whole-frame comparison over our loops whose codes were measured lossless (a speculative loop whose every
    frame equals its own AR loop's): {"fastest_ar", "fastest_spec" (system names), "spec_over_ar" (fastest AR frame /
    fastest lossless speculative frame), "inexact_spec": the fastest speculative system with a differing frame and its
    ratio to the same AR baseline, or None}."""
    systems = {k: v["frame_ms"] for k, v in frames["systems"].items() if not k.startswith("official")}
    lossless = {k: ms for k, ms in systems.items()
                if k.startswith("ar@") or identical_frames(frames, k) in (None, frames["frames"])}
    ar = min((k for k in lossless if k.startswith("ar@")), key=lossless.get)
    spec = min((k for k in lossless if k.startswith("spec")), key=lossless.get)
    apart = {k: ms for k, ms in systems.items() if k.startswith("spec") and k not in lossless}
    other = min(apart, key=apart.get) if apart else None
    return {"fastest_ar": ar, "fastest_spec": spec, "spec_over_ar": lossless[ar] / lossless[spec],
            "inexact_spec": (other, lossless[ar] / apart[other]) if other else None}


def frames_sentence(frames: dict) -> str:
    """The miniature's whole frames per deployment in words, from `frames` (`deployment_frames`' dict)."""
    e = exact_frames(frames)
    passes = all("passes_ms" in r for r in frames["systems"].values())
    text = (f"Among the lossless deployments the fastest AR loop is **{e['fastest_ar']}** and the fastest speculative "
            f"loop **{e['fastest_spec']}**: {e['spec_over_ar']:.2f}x the fastest lossless AR loop"
            + (spread_text(spread(frames["systems"], e["fastest_ar"], e["fastest_spec"])) if passes else "") + ".")
    if e["inexact_spec"]:
        name, ratio = e["inexact_spec"]
        text += (f" Apart, a loop with a frame differing from its own AR frame: {name} at {ratio:.2f}x the fastest "
                 f"lossless AR loop ({e['fastest_ar']}).")
    return text + " " + identical_sentence(frames)


def identical_sentence(frames: dict) -> str:
    """How many speculative frames of each deployment equal its own AR frames (same uniforms), as a sentence."""
    return ("Speculative frames equal to the same deployment's AR frames (same uniforms): "
            + "; ".join(f"{name} " + ", ".join(f"N = {n}: {v} of {frames['frames']}" for n, v in same["spec"].items())
                        for name, same in frames["identical"].items()) + ".")


def grid_timing_sentence(calls: dict, sweep: dict | None = None, grid_load: dict | None = None) -> str:
    """How the call grid times (`measure.deployments.call_grid`'s dict, with "rounds" and "warmup": every deployment's
    calls once per round, shuffled), against the latency sweep's blocks; with `sweep` (metrics' `latency.<device>`:
    "dtype", "ar_call_ms_p50", "machine") the same deployment's AR call in both, and the loads where both kept them
    (`grid_load`: the grid's machine record)."""
    names = [k for k, v in calls.items() if isinstance(v, dict) and "ar_ms" in v]
    per_round = sum(1 + len(calls[k]["by_n"]) for k in names)
    text = (f"Here every deployment's calls ({len(names)} deployments, {per_round} calls) run once per round in a "
            f"shuffled order, {calls['rounds']} rounds after {calls['warmup']}, and each call keeps the p50 over the "
            "rounds: a call runs among the others, not back to back with itself as in the latency sweep above.")
    dtype = (sweep or {}).get("dtype", "").removeprefix("torch.")
    if dtype in names:
        grid_ms, sweep_ms = calls[dtype]["ar_ms"], sweep["ar_call_ms_p50"]
        loads = [((r or {}).get("load") or {}) for r in (grid_load, sweep.get("machine"))]
        lower = all(ld.get("start") is not None and ld.get("end") is not None for ld in loads) and (
            loads[0]["start"] + loads[0]["end"] < loads[1]["start"] + loads[1]["end"])
        text += (f" The {dtype} AR call reads {grid_ms:.3f} ms here against {sweep_ms:.3f} ms in the sweep"
                 + (", although the load average was lower here" if lower else "") + ".")
    return text + " Compare milliseconds and overheads within one table, not across the two."


def phase_split_sentence(calls: dict, phases: dict) -> str:
    """The phase split (`measure.deployments.call_phases`: {"deployment", "by_n"}) as its own measurement: its calls
    alone beside their projections, layers and heads timed apart and their medians added, so its call reads another
    number than the grid's (`calls`, the same deployment's row) at each N both hold."""
    name = phases["deployment"]
    by_n = {int(n): r for n, r in phases["by_n"].items()}
    grid = calls.get(name, {})
    grid_ms = {0: grid.get("ar_ms"), **{int(n): r["call_ms"] for n, r in grid.get("by_n", {}).items()}}
    both = [n for n in sorted(by_n) if grid_ms.get(n) is not None]
    text = (f"The phase split is its own measurement: {name}'s calls (N = {', '.join(map(str, sorted(by_n)))}) "
            "alone, each beside a replica of its projections, in shuffled rounds of their own, layers and heads timed "
            "apart and their medians added")
    if both:
        text += (", so its calls read other milliseconds than the grid's, where every deployment's calls share "
                 "each round (" + "; ".join(f"{'the AR call' if n == 0 else f'N = {n}'}: {by_n[n]['call_ms']:.2f} ms "
                                       f"against {grid_ms[n]:.2f}" for n in both) + ")")
    return text + ": read the phases as shares of their own call."


def deployment_calls_md(dep: dict, where: str, calls_table: str, phases_table: str, sweep: dict | None = None) -> str:
    """The call per deployment (its table, with the deployments this CPU cannot run and why, and how the grid times,
    `grid_timing_sentence`), then where a call's time goes (its table, `phase_split_sentence`), as notebook 06 shows
    them (`helpers.experiment.bench.deployment_bench.deployment_comparison`). sweep: metrics' `latency.<device>`."""
    left_out = "".join(f" {name}: not timed on this CPU ({why})." for name, why in dep.get("left_out", {}).items())
    return (f"{where}: the call per deployment, p50 ms (overhead).{left_out} "
            f"{grid_timing_sentence(dep['calls'], sweep, dep.get('machine'))}\n\n{calls_table}\n\n"
            f"Where a call's time goes ({dep['phases']['deployment']}, p50 ms; N = 0: the AR call). "
            f"{phase_split_sentence(dep['calls'], dep['phases'])}\n\n{phases_table}")


def deployments_md(dep: dict, hidden_size: int, frames_sentence: str) -> str:
    """The miniature per deployment: the lossless comparison (`frames_sentence`), then how much of a
    call the projections are at this shape."""
    shares = ", ".join(f"{r['projections_ms'] / r['call_ms']:.0%} of the {'AR' if int(n) == 0 else f'N = {n}'} call"
                       for n, r in dep["phases"]["by_n"].items())
    return (frames_sentence + f" At this shape (hidden {hidden_size}) the projections are {shares} "
            f"({dep['phases']['deployment']}, the phases above); the rest (attention, norms, RoPE, copies, each a "
            "small operation with its own fixed cost) does not depend on the kernel. The sections below take the "
            "same deployments to the real code predictor's size, then to the 0.6B shape.")


def deployments_report_lines(m: dict) -> list[str]:
    """report.md's section from metrics' "deployments" (the miniature's whole frames per deployment); [] without it."""
    dep = m.get("deployments")
    if not dep:
        return []
    fr = dep["frames"]
    return [f"## The miniature in every deployment ({dep['device']})", "", measured_on(dep.get("machine")) + ":", "",
            markdown(frames_rows(fr)), "",
            frames_sentence(fr) + f" Fastest official generate: {fr['official']}.", ""]
