"""The committed GPU reference (`make bench-gpu` -> outputs/gpu-reference/bench_gpu.json) as tables and a sentence,
each number labelled with the machine it was measured on (notebook 06, the README, `scripts/bench_gpu.py`): the
miniature's whole frames, the captured round at t = 1 per shape and mode, and the projection at the 0.6B shape.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.measure.speedup import formula, frame_speedup
from helpers.report.paper import paper_speedup


GPU_REFERENCE = Path(__file__).resolve().parents[2] / "outputs" / "gpu-reference" / "bench_gpu.json"   # committed


def load_gpu_reference(path: str | Path = GPU_REFERENCE) -> dict | None:
    """The GPU reference, or None where there is none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def gpu_label(data: dict) -> str:
    """"Measured on NVIDIA H200, one run of make bench-gpu"."""
    return f"Measured on {data['device']}, one run of make bench-gpu (torch {data['torch']})"


def gpu_frame_rows(data: dict, part: str = "mini") -> list[dict]:
    """One row per system of a part's side-by-side ("mini": the miniature; "full": at the real size), fastest first."""
    side = data[part]["side_by_side"]
    best = side["fastest_ar"]
    rows = []
    for name, r in sorted(side["systems"].items(), key=lambda kv: kv[1]["frame_ms"]):
        rows.append({"system": name, "ms per frame (p50)": round(r["frame_ms"], 2),
                     "x the fastest AR": round(side["ratios"][name][best], 2),
                     "tokens/step": round(r["tokens_per_step"], 2) if r["tokens_per_step"] else "-",
                     "host reads per frame": round(r["reads_per_frame"], 1) if r.get("reads_per_frame") is not None
                     else "-", "identical to AR": f"{r['identical']}/{side['frames']}" if r["identical"] is not None
                     else "-"})
    return rows


def gpu_round_rows(data: dict) -> list[dict]:
    """The captured round at t = 1: AR call, verify call and round (ms, and in AR calls) per shape, mode and N;
    the projected speedup with the paper's tokens/step where the reference projects one (the 0.6B shape)."""
    rows = []
    shapes = [("miniature, float32", data.get("mini", {}).get("round_parts", {}))]
    if "real" in data:
        shapes.append((f"0.6B shape, {data['real']['dtype']}", data["real"]["modes"]))
    for shape, modes in shapes:
        fastest = min((p["ar_call_ms"] for p in modes.values() if "skipped" not in p), default=None)
        for mode, prof in modes.items():
            if "skipped" in prof:
                continue
            ar = prof["ar_call_ms"]
            for n, r in prof["trees"].items():
                row = {"shape": shape, "mode": mode, "N": int(n), "AR call ms": round(ar, 3),
                       "verify ms": round(r["verify_ms"], 3), "round ms": round(r["round_ms"], 3),
                       "verify / AR call": round(r["verify_ms"] / ar, 2), "round / AR call": round(r["round_ms"] / ar, 2)}
                projection = prof.get("projection", {}).get(n)
                row["projected speedup (paper tokens/step), over its own AR call"] = (
                    f"{projection['frame']:.2f}x at {projection['tokens_per_step']}" if projection else "-")
                row["projected, over the fastest AR call of any mode"] = (
                    f"{against_fastest(projection, ar, r['round_ms'], fastest):.2f}x" if projection else "-")
                rows.append(row)
    return rows


def against_fastest(projection: dict, ar_ms: float, round_ms: float, fastest_ar_ms: float, codes: int = 15) -> float:
    """A mode's projected frame (its prefill, an AR call, plus 15 / tokens-per-step - 1 rounds) against a frame of 15
    calls of the fastest AR call of any mode: the ratio that does not flatter a mode with a slow AR call."""
    return fastest_ar_ms / ar_ms * frame_speedup(projection["tokens_per_step"], round_ms / ar_ms, codes)


def gpu_summary(data: dict) -> dict:
    """The headline numbers: the miniature's fastest speculative over fastest AR and its tokens/step, its verify and
    round in AR calls (inductor_graph, N = 32), the ceiling tokens/step / (verify / AR call); the 0.6B shape's
    round in AR calls and projected speedup at N = 32 (the fastest mode), and Figure 4's formula on the same calls
    (the paper's tokens/step over the verify call in AR calls: like with the paper's speedups)."""
    side = data["mini"]["side_by_side"]
    spec, ar = side["fastest_spec"], side["fastest_ar"]
    tps = side["systems"][spec]["tokens_per_step"]
    mini_parts = data["mini"]["round_parts"]
    mode = "inductor_graph" if "inductor_graph" in mini_parts else next(iter(mini_parts))
    n = max(mini_parts[mode]["trees"], key=int)
    mp = mini_parts[mode]["trees"][n]
    mini_verify = mp["verify_ms"] / mini_parts[mode]["ar_call_ms"]
    real = {m: p for m, p in data["real"]["modes"].items() if "skipped" not in p and "32" in map(str, p["trees"])}
    best = min(real, key=lambda m: real[m]["trees"][_key(real[m]["trees"], 32)]["round_ms"])
    r32 = real[best]["trees"][_key(real[best]["trees"], 32)]
    fastest_ar = min(real, key=lambda m: real[m]["ar_call_ms"])
    p32 = real[best]["projection"][_key(real[best]["projection"], 32)]
    return {"speedup": side["ratios"][spec][ar], "fastest_spec": spec, "fastest_ar": ar, "tokens_per_step": tps,
            "mini_mode": mode, "mini_n": int(n), "mini_verify_over_ar": mini_verify,
            "mini_round_over_ar": mp["round_ms"] / mini_parts[mode]["ar_call_ms"],
            "ceiling": formula(tps, mini_verify), "real_mode": best,
            "real_verify_over_ar": r32["verify_ms"] / real[best]["ar_call_ms"],
            "real_round_over_ar": r32["round_over_ar"],
            "real_projected": p32["frame"], "real_fastest_ar_mode": fastest_ar,
            "real_projected_vs_fastest": against_fastest(p32, real[best]["ar_call_ms"], r32["round_ms"],
                                                         real[fastest_ar]["ar_call_ms"]),
            "paper_tokens_per_step": p32["tokens_per_step"],
            "real_formula": formula(p32["tokens_per_step"], r32["verify_ms"] / real[best]["ar_call_ms"])}


def _key(d: dict, n: int):
    return n if n in d else str(n)


def gpu_sentence(data: dict) -> str:
    """Where the method pays and what holds it down, from the reference's own numbers."""
    s = gpu_summary(data)
    verdict = "faster than" if s["speedup"] > 1.0 else "no faster than"
    return (f"{gpu_label(data)}: at batch 1 a GPU call is launch-bound, so the verify call over N + 1 = 33 tokens "
            f"costs only {s['real_verify_over_ar']:.2f} AR calls at the 0.6B shape ({s['real_mode']}), and a whole "
            f"round, with its sampling, walk, commit and drafts, {s['real_round_over_ar']:.2f}: with the paper's "
            f"{s['paper_tokens_per_step']:.2f} tokens/step at N = 32 (inferred: Table 2's value, which Figure 4 does "
            f"not print) Figure 4's formula on these calls gives {s['paper_tokens_per_step']:.2f} / "
            f"{s['real_verify_over_ar']:.2f} = {s['real_formula']:.2f}x (a formula, like the paper's "
            f"{paper_speedup()}); a whole frame of one AR call for the prefill and 15 / "
            f"{s['paper_tokens_per_step']:.2f} - 1 rounds of {s['real_round_over_ar']:.2f} AR calls projects "
            f"{s['real_projected']:.2f}x over its own AR frame, "
            f"{s['real_projected_vs_fastest']:.2f}x over the fastest AR call of any mode ({s['real_fastest_ar_mode']}). On "
            f"the miniature the fastest speculative loop ({s['fastest_spec']}) is {s['speedup']:.2f}x the fastest AR "
            f"loop ({s['fastest_ar']}), {verdict} it: its {s['tokens_per_step']:.2f} tokens/step meet a verify call of "
            f"{s['mini_verify_over_ar']:.2f} AR calls and a round of {s['mini_round_over_ar']:.2f} "
            f"({s['mini_mode']}, N = {s['mini_n']}), so even a round that cost its verify call alone would give at "
            f"most {s['ceiling']:.2f}x.")
