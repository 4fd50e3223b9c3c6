"""Whole frames at the real code predictor's size: the trained miniature embedded at the 0.6B shape
(`helpers.adapter.full_size`: the same codes at the real shape's cost), every CPU deployment, our AR loop and the
speculative loop per N, interleaved frame by frame on the same frames and uniforms (`deployments.deployment_frames`).

    full_size_frames(talker, drafter, trees, g, c0, sampler) -> the table `metrics.json` keeps under "full_size":

    shape      the code predictor's sizes (its vocabulary is the miniature's)
    systems    {name: {deployment, n (0: AR), frame_ms (median of the passes' p50), passes_ms (each pass's p50),
               tokens_per_step, frames, identical, lossless}}: identical counts the timed frames equal to that
               deployment's own AR frames, lossless = all of them
    fastest_ar, fastest_spec (lossless only), speedup   the fastest AR loop over the fastest speculative loop: the
               median over the interleaved passes of their frame p50s' ratio in each pass (one pass: that ratio)
    spread     that ratio in each interleaved pass of the same frames, its median and range (`spread`)
    identity   speculative loops counted against their AR loops on more frames, untimed: {frames, identical:
               {system: frames equal}}, the fastest speculative loop always, every one with identity_all
    calls      per deployment: the AR call and each N's verify call alone, p50 ms and overhead (`call_grid`)
    loop       per deployment: its AR frame over 15 of its AR calls (what the loop adds to its calls)
    formula    Figure 4's formula on our own calls, per deployment and N: tokens/step / (verify call / AR call)
               (`formula_on_calls`), a formula beside the paper's, not a measurement
    model      a frame's time fitted on these frames, per deployment: per frame + rounds x (its call + round work)
               (`frame_model`), and its error on them
    projected  the paper's tokens/step through that model, labelled projected (`projected`)
    peers      {name: {engine, dtype, threads, ar_step_ms (its AR call: one decode call on one token, no sampling),
               q_call_ms: {q: ms}, floor_ms, frame_ms, measured_on, source}}: the engines a CPU user would run instead
               (ONNX Runtime's `quantize_dynamic`, llama.cpp) at the same shape and threads
               (`measure.peers.table.peers_block`); floors: the read floor of one AR call's weights per weight format,
               and the read measured; fastest_ar_any, speedup_any: the fastest AR frame of any engine (a peer's: 15 of
               its AR calls) over the fastest lossless speculative frame
    machine    where, with the load average at the start and the end (`measure.machine.timed_on`)
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.adapter.full_size import full_size
from helpers.measure.machine import load_average, measured_on, timed_on
from helpers.measure.speedup import formula
from helpers.measure.deployments import (DEPLOYMENTS, call_grid, deployed, deployment_frames, identical_frames,
                                         runnable, spread, spread_text)
from helpers.method.drafters import Drafter
from helpers.method.kernels import fits
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.tree import SparseTree

@torch.no_grad()
def full_size_frames(talker: torch.nn.Module, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                     c0: torch.Tensor, sampler: SamplerConfig = SamplerConfig(), names=None, warmup_frames: int = 1,
                     call_rounds: int = 20, seed: int = 0, paper_tokens_per_step: dict | None = None,
                     peers: bool = True, frames: int | None = None, passes: int = 3, identity_frames: int = 0,
                     identity_all: bool = False) -> dict:
    """The miniature `talker` (official, its trained `drafter`) at the 0.6B shape, every deployment in `names`
    (default: every one this CPU runs), real frames g [F, H_s], c0 [F], trees {N: SparseTree}. See the module
    docstring. The first `frames` frames (default all) are timed in `passes` interleaved passes; the headline's
    speculative loop (every speculative loop with `identity_all`) is counted against its AR loop on the first
    `identity_frames` frames (untimed; 0: the timed frames only). paper_tokens_per_step {N: tokens/step}: the
    projection's numerators (default none); peers: time the engines a user would run instead beside them
    (`measure.peers.table`)."""
    fs, start = full_size(talker), load_average()          # the 0.6B code predictor's shape; the load before
    big = CodePredictor.from_talker(fs.talker)
    names = [n for n in (runnable() if names is None else names)
             if fits(DEPLOYMENTS[n][1], big.hidden_size, big.config.intermediate_size)]
    systems = deployed(fs.talker, fs.drafter(drafter, big), drafter.depth, names)
    frames = g.shape[0] if frames is None else min(frames, g.shape[0])
    u = frame_uniforms(torch.Generator().manual_seed(seed), 15, batch=g.shape[0])
    lifted = fs.lift(g)
    result = deployment_frames(systems, trees, lifted[:frames], c0[:frames], u[:frames], sampler, official=False,
                               warmup_frames=warmup_frames, seed=seed, samples=True, passes=passes)
    calls = call_grid(systems, trees, warmup=3, rounds=call_rounds, seed=seed)
    rows = {}
    for name in names:
        for n in [0, *trees]:
            key = f"ar@{name}" if n == 0 else f"spec{n}@{name}"
            same = frames if n == 0 else result["identical"][name]["spec"][n]
            rows[key] = {"deployment": name, "n": n, **{k: result["systems"][key][k] for k in
                                                          ("frame_ms", "passes_ms", "tokens_per_step")},
                         "frames": frames, "identical": same, "lossless": same == frames}
    fastest_ar = min((k for k, r in rows.items() if r["n"] == 0), key=lambda k: rows[k]["frame_ms"])
    lossless = [k for k, r in rows.items() if r["n"] and r["lossless"]]
    fastest_spec = min(lossless, key=lambda k: rows[k]["frame_ms"]) if lossless else None
    model = {name: frame_model(result["samples"], name, calls[name]) for name in names}
    cfg = fs.talker.code_predictor.config
    shape = {"hidden_size": cfg.hidden_size, "num_layers": cfg.num_hidden_layers, "num_heads": cfg.num_attention_heads,
             "num_kv_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
             "intermediate_size": cfg.intermediate_size, "vocab_size": cfg.vocab_size}
    out = {"shape": shape,
           "scale": fs.scale, "frames": frames, "systems": rows, "fastest_ar": fastest_ar,
           "fastest_spec": fastest_spec,
           "spread": spread(rows, fastest_ar, fastest_spec),
           "calls": {name: calls[name] for name in names},
           "loop": {name: rows[f"ar@{name}"]["frame_ms"] / (15 * calls[name]["ar_ms"]) for name in names},
           "model": model, "formula": formula_on_calls(rows, calls)}
    out["speedup"] = (out["spread"]["median"] if out["spread"] and len(out["spread"]["passes"]) > 1 else
                      rows[fastest_ar]["frame_ms"] / rows[fastest_spec]["frame_ms"] if fastest_spec else None)
    count = min(max(identity_frames, frames), g.shape[0])
    counted = [k for k, r in rows.items() if r["n"] and (identity_all or k == fastest_spec)]
    rest = slice(frames, count)                                  # frames the timed passes did not decode
    out["identity"] = {"frames": count, "identical": {
        k: rows[k]["identical"] + (identical_frames(*systems[rows[k]["deployment"]], trees[rows[k]["n"]], lifted[rest],
                                                    c0[rest], u[rest], sampler) if count > frames else 0)
        for k in counted}}
    if paper_tokens_per_step:
        out["projected"] = projected(out, paper_tokens_per_step)
    if peers:
        from helpers.measure.peers.table import peers_block
        from helpers.method.stack import FusedCore

        fp32 = CodePredictor.from_talker(fs.talker, dtype=torch.float32)          # the peers' weights: float32
        block = peers_block(FusedCore(fp32, max_depth=max(t.max_depth for t in trees.values())), trees)
        out["peers"], out["floors"] = block["rows"], block["floor"]
        baselines = {k: rows[k]["frame_ms"] for k in rows if rows[k]["n"] == 0}
        baselines.update({k: r["frame_ms"] for k, r in out["peers"].items()})
        out["fastest_ar_any"] = min(baselines, key=baselines.get)
        out["speedup_any"] = baselines[out["fastest_ar_any"]] / rows[fastest_spec]["frame_ms"] if fastest_spec else None
    out["machine"] = timed_on(start)
    return out


def formula_on_calls(rows: dict, calls: dict) -> dict:
    """Figure 4's formula on our own calls, per deployment and N: the frames' tokens/step over the verify call's cost
    in AR calls, each call timed alone (`call_grid`): {deployment: {N: {"tokens_per_step", "call_over_ar",
    "speedup"}}}. A formula, like the paper's speedups: the whole frames measure the speedup."""
    out = {}
    for key, r in rows.items():
        if r["n"]:
            c = calls[r["deployment"]]
            cost = c["by_n"][r["n"]]["call_ms"] / c["ar_ms"]
            out.setdefault(r["deployment"], {})[r["n"]] = {"tokens_per_step": r["tokens_per_step"],
                                                           "call_over_ar": cost,
                                                           "speedup": formula(r["tokens_per_step"], cost)}
    return out


def frame_model(samples: dict, name: str, calls: dict) -> dict:
    """A frame's time as once-per-frame work + per round (its verify call, as timed alone in `calls`, times b, plus
    the round's own work w): frame = a + (rounds) x (b x call(N) + w), rounds = calls - 1 after the prefill. a, b, w
    are fitted by least squares on every timed frame of the deployment's AR (N = 0, 14 steps) and speculative loops
    (`samples` of `deployment_frames`), three numbers for all N, so the fit can miss: its error per loop is
    (model - measured) / measured, on the mean frame. -> {"frame_ms": a, "call_factor": b, "round_work_ms": w,
    "round_ms": {N: b x call(N) + w}, "round_over_ar_step": {N: round(N) / round(0)}, "error": {N: ...},
    "max_error"}."""
    sizes = [0, *[int(n) for n in calls["by_n"]]]
    call_ms = {n: calls["ar_ms"] if n == 0 else calls["by_n"][n]["call_ms"] for n in sizes}
    key = {n: f"ar@{name}" if n == 0 else f"spec{n}@{name}" for n in sizes}
    rows, y = [], []
    for n in sizes:
        for ms, c in zip(samples[key[n]]["ms"], samples[key[n]]["calls"]):
            rows.append([1.0, (c - 1.0) * call_ms[n], c - 1.0])
            y.append(ms)
    a, b, w = (float(v) for v in np.linalg.lstsq(np.array(rows), np.array(y), rcond=None)[0])
    rounds = {n: b * call_ms[n] + w for n in sizes}
    error = {}
    for n in sizes:
        ms, c = np.array(samples[key[n]]["ms"]), np.array(samples[key[n]]["calls"], dtype=float)
        error[n] = float((a + rounds[n] * (c.mean() - 1)) / ms.mean() - 1)
    return {"frame_ms": a, "call_factor": b, "round_work_ms": w, "round_ms": rounds,
            "round_over_ar_step": {n: rounds[n] / rounds[0] for n in sizes}, "error": error,
            "max_error": max(abs(e) for e in error.values())}


def projected(table: dict, paper_tokens_per_step: dict) -> dict:
    """The paper's tokens/step through each deployment's fitted frame model (`frame_model`), at every N both were
    measured at: {deployment: {N: {"tokens_per_step", "frame_ms", "speedup"}}}, speedup against the fastest AR frame
    measured (any deployment). Projected, not measured: its model's error is `model[...]["max_error"]`."""
    ar = table["systems"][table["fastest_ar"]]["frame_ms"]
    out = {}
    for name, m in table["model"].items():
        for n, tps in paper_tokens_per_step.items():
            if int(n) in m["round_ms"] and int(n):
                frame = m["frame_ms"] + m["round_ms"][int(n)] * (15 / tps - 1)
                out.setdefault(name, {})[int(n)] = {"tokens_per_step": tps, "frame_ms": frame, "speedup": ar / frame}
    return out


def full_size_rows(table: dict) -> list[dict]:
    """Table rows, one per deployment: its AR frame, then per N the speculative frame (speedup against the fastest AR
    frame of any deployment), tokens/step and identical frames."""
    ar = table["systems"][table["fastest_ar"]]["frame_ms"]
    out = []
    for name in sorted(table["calls"], key=lambda d: list(DEPLOYMENTS).index(d) if d in DEPLOYMENTS else len(d)):
        r = {"deployment": name, "AR frame ms": f"{table['systems'][f'ar@{name}']['frame_ms']:.1f}"}
        for s in sorted(table["systems"].values(), key=lambda s: s["n"]):
            if s["deployment"] == name and s["n"]:
                r[f"N={s['n']} ms (x)"] = f"{s['frame_ms']:.1f} ({ar / s['frame_ms']:.2f}x)"
                r[f"N={s['n']} tok/step"] = round(s["tokens_per_step"], 2)
                r[f"N={s['n']} identical"] = f"{s['identical']}/{s['frames']}"
        r["AR frame / 15 AR calls"] = round(table["loop"][name], 2)
        out.append(r)
    return out


def format_full_size(table: dict) -> str:
    """The table as text (`make bench`), with the fastest loops and the model's error."""
    lines = [measured_on(table.get("machine")) + ", p50 ms per frame"]
    rows = full_size_rows(table)
    keys = list(rows[0])
    lines.append(" | ".join(keys))
    lines += [" | ".join(str(r.get(k, "-")) for k in keys) for r in rows]
    spec = table["fastest_spec"]
    lines.append(f"fastest AR {table['fastest_ar']} {table['systems'][table['fastest_ar']]['frame_ms']:.1f} ms; "
                 + (f"fastest lossless speculative {spec} {table['systems'][spec]['frame_ms']:.1f} ms: "
                    f"{table['speedup']:.2f}x" + spread_words(table) if spec else "no lossless speculative loop"))
    for name, m in table["model"].items():
        lines.append(f"  {name} frame model (fitted, not measured): per frame {m['frame_ms']:.1f} ms, a round "
                     f"{m['call_factor']:.2f} x its call + {m['round_work_ms']:.2f} ms, a round in AR steps "
                     + ", ".join(f"N={n} {v:.2f}" for n, v in m["round_over_ar_step"].items() if n)
                     + f"; its error on these frames at most {m['max_error']:.1%}")
    for name, by_n in table.get("formula", {}).items():
        lines.append(f"  {name} by Figure 4's formula, tokens/step / (verify call / AR call): "
                     + ", ".join(f"N={n} {f['tokens_per_step']:.2f} / {f['call_over_ar']:.3f} = {f['speedup']:.2f}x"
                                 for n, f in by_n.items()))
    ident = table.get("identity") or {"identical": {}}
    if ident["identical"]:
        lines.append(f"equal to their own AR frames on {ident['frames']} frames, counted apart from the timing: "
                     + ", ".join(f"{k} {v}" for k, v in ident["identical"].items()))
    if "peers" in table:
        lines += format_peers(table)
    return "\n".join(lines)


def spread_words(table: dict) -> str:
    """" (3 interleaved passes: 1.30x, 1.37x, 1.40x, median 1.37x, range 1.30-1.40x); spec8@w8a8 equal to its AR
    frames on 100 of 100 frames, counted apart" from a table's spread and identity ("" where it has neither)."""
    out, ident, spec = spread_text(table.get("spread")), table.get("identity"), table.get("fastest_spec")
    if ident and spec in ident["identical"]:
        out += (f"; {spec} equal to its AR frames on {ident['identical'][spec]} of {ident['frames']} frames, "
                "counted apart from the timing")
    return out


def format_peers(table: dict) -> list[str]:
    """The engines beside ours as text lines: each one's AR step and q-row calls, its floor; the headline against
    the fastest AR loop of any engine."""
    floor = table["floors"]["read"]
    lines = [f"engines at this shape and threads, p50 ms (floor: the step's weights read once at "
             f"{floor['gb_per_s']:.1f} GB/s):"]
    for name, ours in table["calls"].items():
        lines.append(f"  ours {name:>22}: AR call {ours['ar_ms']:6.2f}; "
                     + ", ".join(f"q={c['q']} {c['call_ms']:.2f}" for c in ours["by_n"].values()))
    for name, r in table["peers"].items():
        lines.append(f"  {name:>27}: AR step {r['ar_step_ms']:6.2f}; "
                     + ", ".join(f"q={q} {ms:.2f}" for q, ms in r["q_call_ms"].items())
                     + f"; floor {r['floor_ms']:.2f} ({r['source']})")
    if table.get("speedup_any"):
        lines.append(f"fastest AR loop of any engine {table['fastest_ar_any']} (a peer's: 15 AR steps); fastest "
                     f"lossless speculative {table['fastest_spec']}: {table['speedup_any']:.2f}x")
    return lines
