"""The committed GPU reference (`make bench-gpu` -> outputs/gpu-reference/bench_gpu.json) as tables and a sentence,
each number labelled with the machine it was measured on (notebook 06, the README, `scripts/bench_gpu.py`): the
miniature's whole frames, the captured round at t = 1 per shape and mode, and the projection at the 0.6B shape.
Its "ar_call_ms" is a captured *AR step* (`helpers.method.round.ARStep`: the AR call, sampling, the KV commit): every
ratio here is over an AR step; the file holds no captured AR call alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers.measure.speedup import formula, frame_speedup
from helpers.report.paper import paper_speedup


CODES = 15          # codes a frame decodes after c0
ROOT = Path(__file__).resolve().parents[2]
GPU_REFERENCE = ROOT / "outputs" / "gpu-reference" / "bench_gpu.json"   # committed


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
    """The captured round at t = 1: AR step, verify call and round (ms, and in AR steps) per shape, mode and N;
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
                row = {"shape": shape, "mode": mode, "N": int(n), "AR step ms": round(ar, 3),
                       "verify ms": round(r["verify_ms"], 3), "round ms": round(r["round_ms"], 3),
                       "verify / AR step": round(r["verify_ms"] / ar, 2),
                       "round / AR step": round(r["round_ms"] / ar, 2)}
                projection = prof.get("projection", {}).get(n)
                row["projected speedup (paper tokens/step), over its own AR steps"] = (
                    f"{projection['frame']:.2f}x at {projection['tokens_per_step']}" if projection else "-")
                row["projected, over the fastest AR step of any mode"] = (
                    f"{against_fastest(projection, ar, r['round_ms'], fastest):.2f}x" if projection else "-")
                rows.append(row)
    return rows


def against_fastest(projection: dict, ar_ms: float, round_ms: float, fastest_ar_ms: float, codes: int = 15) -> float:
    """A mode's projected frame (its prefill, an AR step, plus 15 / tokens-per-step - 1 rounds) against a frame of 15
    of the fastest AR step of any mode: the ratio that does not flatter a mode with a slow AR step."""
    return fastest_ar_ms / ar_ms * frame_speedup(projection["tokens_per_step"], round_ms / ar_ms, codes)


def gpu_summary(data: dict) -> dict:
    """The headline numbers: the miniature's fastest speculative over fastest AR and its tokens/step, its verify and
    round in AR steps (inductor_graph, N = 32), the ceiling tokens/step / (verify / AR step); the 0.6B shape's
    round in AR steps and projected speedup at N = 32 (the fastest mode), and Figure 4's formula with the verify
    call over an AR step as its denominator (keys keep the file's "ar" names)."""
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
    """Where the method pays and what holds it down, from the reference's own numbers, counted in AR steps (the
    captured step: the AR call, sampling, the KV commit)."""
    s = gpu_summary(data)
    verdict = "faster than" if s["speedup"] > 1.0 else "no faster than"
    return (f"{gpu_label(data)}: at batch 1 a GPU call is launch-bound, so the verify call over N + 1 = 33 tokens "
            f"costs only {s['real_verify_over_ar']:.2f} AR steps at the 0.6B shape ({s['real_mode']}; an AR step is "
            f"the captured AR call with its sampling and KV commit), and a whole round, with its sampling, walk, "
            f"commit and drafts, {s['real_round_over_ar']:.2f}: with the paper's {s['paper_tokens_per_step']:.2f} "
            f"tokens/step at N = 32 (inferred: Table 2's value, which Figure 4 does not print) Figure 4's formula "
            f"gives {s['paper_tokens_per_step']:.2f} / {s['real_verify_over_ar']:.2f} = {s['real_formula']:.2f}x. "
            f"Its denominator is the verify call over an AR step, not over an AR call alone as in the paper's "
            f"{paper_speedup()}: this reference holds no captured AR call alone, and the step holds the call, so the "
            f"call-over-call ratio would be larger and the formula's result smaller, by an amount this file does not "
            f"hold. A whole frame of one AR step for the prefill and 15 / {s['paper_tokens_per_step']:.2f} - 1 rounds "
            f"of {s['real_round_over_ar']:.2f} AR steps projects {s['real_projected']:.2f}x over its own AR frame, "
            f"{s['real_projected_vs_fastest']:.2f}x over the fastest AR step of any mode ({s['real_fastest_ar_mode']})."
            f" On the miniature the fastest speculative loop ({s['fastest_spec']}) is {s['speedup']:.2f}x the fastest "
            f"AR loop ({s['fastest_ar']}), {verdict} it: its {s['tokens_per_step']:.2f} tokens/step meet a verify "
            f"call of {s['mini_verify_over_ar']:.2f} AR steps and a round of {s['mini_round_over_ar']:.2f} "
            f"({s['mini_mode']}, N = {s['mini_n']}), so even a round that cost its verify call alone would give at "
            f"most {s['ceiling']:.2f}x.")


ODD = 1.25          # a verify call costing more than this times every larger N's is an odd size


def pack_tree_depths(data: dict, root: str | Path = ROOT) -> dict[int, int] | None:
    """{N: depth} of the trees the reference's miniature ran: its pack's calibration (`args.pack`/calibration.json)
    for its drafter (`mini.drafter`); None where the pack or either name is missing."""
    pack, drafter = (data.get("args") or {}).get("pack"), data.get("mini", {}).get("drafter")
    path = Path(root) / pack / "calibration.json" if pack else None
    if path is None or not drafter or not path.is_file():
        return None
    trees = json.loads(path.read_text()).get("trees", {}).get(drafter)
    return {int(n): max(len(node) for node in paths) for n, paths in trees.items()} if trees else None


def odd_size_sentence(data: dict, depths: dict[int, int] | None = None, odd: float = ODD) -> str:
    """The miniature's captured verify call at an N where it costs more than `odd` times every larger N's: its tree
    depth (`depths`, `pack_tree_depths`) and dispatched ops per round against theirs, whether whole frames (timed
    interleaved) are slower per round there too, and that which kernel takes the time was not measured; "" where
    no N is odd."""
    mini = data.get("mini", {})

    def is_odd(trees, n):
        larger = [m for m in trees if m > n]
        return larger and all(trees[n]["verify_ms"] > odd * trees[m]["verify_ms"] for m in larger)

    modes = {mode: {int(k): v for k, v in prof["trees"].items()}
             for mode, prof in mini.get("round_parts", {}).items() if "skipped" not in prof}
    found = [(mode, n) for mode, trees in modes.items() for n in sorted(trees) if is_odd(trees, n)]
    if not found:
        return ""
    mode, n = found[0]
    trees = modes[mode]
    larger = [m for m in sorted(trees) if m > n]

    def listed(values, fmt="{:.2f}"):
        return " and ".join(fmt.format(v) for v in values)

    text = (f"At N = {n} (q = {trees[n]['q']}) the captured verify call ({mode}) costs {trees[n]['verify_ms']:.2f} ms "
            f"against {listed(trees[m]['verify_ms'] for m in larger)} ms at N = {listed(larger, '{}')}")
    facts = []                                      # (words, True where it does not explain the extra cost)
    if depths and all(m in depths for m in [n, *larger]):
        shallow = depths[n] <= min(depths[m] for m in larger)
        facts.append((f"its tree is {'no deeper' if shallow else 'deeper'} (depth {depths[n]}, against "
                      f"{listed((depths[m] for m in larger), '{}')})", shallow))
    ops = {int(k): v for k, v in mini.get("kernels", {}).get("rounds", {}).items()}
    if all(m in ops for m in [n, *larger]):
        fewer = ops[n] <= min(ops[m] for m in larger)
        facts.append((f"its round dispatches {'no more' if fewer else 'more'} operations ({ops[n]}, against "
                      f"{listed((ops[m] for m in larger), '{}')})", fewer))
    if facts:
        text += (", although " if all(c for _, c in facts) else "; ") + " and ".join(w for w, _ in facts)
    rest = {m: trees[m]["round_ms"] - trees[m]["verify_ms"] for m in [n, *larger]}
    usual = rest[n] <= min(rest[m] for m in larger)
    text += (f"; the round's work besides the call is {'no larger' if usual else 'larger'} there ({rest[n]:.2f} ms, "
             f"against {listed(rest[m] for m in larger)})")
    side = mini.get("side_by_side", {}).get("systems", {})
    per_round = {}
    for name, r in side.items():
        hit = re.fullmatch(r"spec(\d+)_(\w+)", name)
        if hit and r.get("tokens_per_step"):
            per_round.setdefault(hit.group(2), {})[int(hit.group(1))] = r["frame_ms"] * r["tokens_per_step"] / CODES
    slower = {m: v for m, v in per_round.items() if all(k in v for k in [n, *larger])
              and all(v[n] > v[k] for k in larger)}
    if slower and usual:
        text += (f". Whole frames, timed interleaved with the other systems, take more per round at N = {n} too "
                 f"(a frame's time over its {CODES} / tokens-per-step rounds: "
                 + "; ".join(f"spec*_{m} {v[n]:.3f} ms against {listed((v[k] for k in larger), '{:.3f}')}"
                             for m, v in slower.items())
                 + f"), so the extra time is in the call's GPU work at {trees[n]['q']} rows")
    return text + (". Which kernel takes it was not measured: a count of dispatched operations cannot show a kernel "
                   "that launches more blocks or picks a slower algorithm at one size.")
