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


def deployment_calls_md(dep: dict, where: str, calls_table: str, phases_table: str) -> str:
    """The call per deployment (its table, with the deployments this CPU cannot run and why), then where a call's
    time goes (its table), as notebook 06 shows them
    (`helpers.experiment.bench.deployment_bench.deployment_comparison`)."""
    left_out = "".join(f" {name}: not timed on this CPU ({why})." for name, why in dep["left_out"].items())
    return (f"{where}: the call per deployment, p50 ms (overhead).{left_out}\n\n{calls_table}\n\n"
            f"Where a call's time goes ({dep['phases']['deployment']}, p50 ms; N = 0: the AR call)\n\n{phases_table}")


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
