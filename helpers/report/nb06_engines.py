"""Notebook 06's engines section: our loops at the real shape beside the engines a CPU user would run instead
(`metrics.json` "full_size" -> "peers", `helpers.measure.peers.table`), and the floor the weights' reads set.

    peers_rows(table) -> table rows, one per engine: AR call, q-row calls, the floor, the AR call over the floor
    engines_md(table, where) -> what they say: the fastest AR loop of any engine, our fastest lossless speculative
                                loop against it, our AR call against the fastest peer's and the floor

Every engine's row is a call (the model's call on one token, or on q, no sampling): ours from `call_grid`, a peer's
its one decode call (kept under the key "ar_step_ms").
"""

from __future__ import annotations

from helpers.measure.machine import machine_name


def _ours(table: dict) -> dict[str, float]:
    """{deployment: its AR call alone, p50 ms} (`call_grid` at the same shape and threads)."""
    return {name: calls["ar_ms"] for name, calls in table["calls"].items()}


def peers_rows(table: dict) -> list[dict]:
    """One row per engine: ours (each deployment's AR call as timed alone) and the peers', p50 ms."""
    peers, floor = table["peers"], table["floors"]
    sizes = sorted({int(q) for r in peers.values() for q in r["q_call_ms"]})
    rows = []
    for name, ms in _ours(table).items():
        by_q = {int(c["q"]): c["call_ms"] for c in table["calls"][name]["by_n"].values()}
        fmt = floor["float32" if name in ("float32", "ort-float32") else "int8"]
        rows.append(_row(f"ours: {name}", "this run", ms, by_q, sizes, fmt))
    for name, r in peers.items():
        rows.append(_row(name, r["source"] if r["source"] == "this run" else
                         f"{r['source']}, {machine_name(r['measured_on'])}", r["ar_step_ms"],
                         {int(q): v for q, v in r["q_call_ms"].items()}, sizes, r["floor_ms"]))
    return rows


def _row(name, source, ar, by_q, sizes, floor) -> dict:
    return {"engine": name, "measured": source, "AR call ms": round(ar, 2),
            **{f"q={q} ms": round(by_q[q], 2) if q in by_q else "-" for q in sizes},
            "floor ms": round(floor, 2), "AR call / floor": round(ar / floor, 2)}


def fastest_peer(table: dict) -> str:
    """The peer with the cheapest AR call."""
    peers = table["peers"]
    return min(peers, key=lambda k: peers[k]["ar_step_ms"])


def engines_md(table: dict, where: str) -> str:
    """The engines in sentences (module docstring)."""
    s, peers, floor = table["systems"], table["peers"], table["floors"]
    best, spec = table["fastest_ar_any"], table["fastest_spec"]
    best_ms = s[best]["frame_ms"] if best in s else peers[best]["frame_ms"]
    peer = fastest_peer(table)
    ours = _ours(table)
    step = min(ours, key=ours.get)
    text = [f"{where}. One thread reads the {floor['read']['bytes'] / 1e6:.1f} MB of an int8 AR call's weights in "
            f"{floor['read']['ms']:.2f} ms ({floor['read']['gb_per_s']:.1f} GB/s): the floor of an AR call that "
            "reads its weights once.",
            f"Our cheapest AR call is **{step}** at {ours[step]:.2f} ms, {ours[step] / floor['int8']:.2f}x that "
            f"floor; the cheapest peer's AR call is **{peer}** at {peers[peer]['ar_step_ms']:.2f} ms "
            f"({peers[peer]['ar_step_ms'] / floor['int8']:.2f}x the floor): ours is "
            f"{ours[step] / peers[peer]['ar_step_ms']:.2f}x its time."]
    if spec:
        text.append(f"A peer's AR frame is taken as 15 of its AR calls and nothing else (the least it can cost). "
                    f"The fastest AR loop of any engine is then **{best}** ({best_ms:.1f} ms a frame), and our "
                    f"fastest lossless speculative loop, **{spec}** ({s[spec]['frame_ms']:.1f} ms), is "
                    f"**{table['speedup_any']:.2f}x** that loop, measured on whole frames against it.")
    others = sorted({r["source"] for r in peers.values() if r["source"] != "this run"})
    if others:
        text.append("llama.cpp's rows come from " + " and ".join(others) + ", on the machine they name: it is built "
                    "by `make peers`, which `make run` does not do.")
    return " ".join(text)
