"""Whole frames at the real code predictor's size (`helpers.measure.full_size_frames`) and their story
(`helpers.report.full_size`): the table's fields and counts, the frame model's arithmetic, sentences read off the
numbers they were built from."""

import json

import pytest
import torch

from helpers.experiment.bench.inner_loop_pack import load_pack
from helpers.measure.full_size_frames import format_full_size, frame_model, full_size_frames, full_size_rows, projected
from helpers.report.nb06_engines import engines_md, peers_rows
from helpers.report.full_size import full_size_figure, full_size_md


def test_the_frame_model_recovers_a_frame_it_was_built_from():
    calls = {"ar_ms": 10.0, "by_n": {4: {"call_ms": 11.0}, 8: {"call_ms": 13.0}}}
    a, b, w = 6.0, 1.1, 0.5                                        # per frame, call factor, round work
    frame = {0: 15, 4: [10, 11, 9], 8: [9, 8, 10]}
    samples = {"ar@x": {"ms": [a + 14 * (b * 10 + w)] * 3, "calls": [15] * 3}}
    for n in (4, 8):
        c = frame[n]
        samples[f"spec{n}@x"] = {"ms": [a + (k - 1) * (b * calls["by_n"][n]["call_ms"] + w) for k in c], "calls": c}
    m = frame_model(samples, "x", calls)
    assert m["frame_ms"] == pytest.approx(a) and m["call_factor"] == pytest.approx(b)
    assert m["round_work_ms"] == pytest.approx(w) and m["max_error"] < 1e-9
    assert m["round_over_ar_step"][8] == pytest.approx((b * 13 + w) / (b * 10 + w))
    table = {"systems": {"ar@x": {"frame_ms": 150.0}}, "fastest_ar": "ar@x", "model": {"x": m}}
    p = projected(table, {8: 2.0, 16: 2.25})                       # N = 16 was not measured: not projected
    assert list(p["x"]) == [8] and p["x"][8]["frame_ms"] == pytest.approx(a + (15 / 2 - 1) * (b * 13 + w))
    assert p["x"][8]["speedup"] == pytest.approx(150.0 / p["x"][8]["frame_ms"])


@pytest.fixture(scope="module")
def table():
    pack = load_pack("outputs/gpu-pack", dtype=torch.float32)
    trees = {n: pack.trees[pack.main][n] for n in (4, 8)}
    return full_size_frames(pack.talker, pack.drafters[pack.main], trees, pack.g[:3], pack.c0[:3], pack.sampler,
                            names=["float32", "w8a8", "ort-w8a8"], call_rounds=3, paper_tokens_per_step={8: 2.0},
                            frames=2, passes=2, identity_frames=3)


def test_every_deployment_at_the_real_shape_decodes_lossless_frames(table):
    assert table["shape"] == {"hidden_size": 1024, "num_layers": 5, "num_heads": 16, "num_kv_heads": 8,
                              "head_dim": 128, "intermediate_size": 3072, "vocab_size": 256}
    assert set(table["systems"]) == {f"{k}@{d}" for k in ("ar", "spec4", "spec8")
                                     for d in ("float32", "w8a8", "ort-w8a8")}
    for name, s in table["systems"].items():
        assert s["frames"] == 2 and s["frame_ms"] > 0 and (s["n"] == 0) == name.startswith("ar@")
        assert s["lossless"] and s["identical"] == 2                 # w8a8 too: one int8 scale per row
        assert (s["tokens_per_step"] == 1.0) if s["n"] == 0 else 1.0 < s["tokens_per_step"] <= 15.0
    for s in table["systems"].values():                            # two interleaved passes, their median
        assert len(s["passes_ms"]) == 2 and s["frame_ms"] == pytest.approx(sum(s["passes_ms"]) / 2)
    fastest = min((k for k in table["systems"] if k.startswith("ar@")), key=lambda k: table["systems"][k]["frame_ms"])
    assert table["fastest_ar"] == fastest
    assert set(table["projected"]) == {"float32", "w8a8", "ort-w8a8"} and set(table["calls"]["w8a8"]["by_n"]) == {4, 8}
    spec, ar = (table["systems"][table[k]]["passes_ms"] for k in ("fastest_spec", "fastest_ar"))
    spread = table["spread"]                                        # the headline per pass, its median and range
    assert spread["passes"] == pytest.approx([a / s for a, s in zip(ar, spec)])
    assert spread["min"] <= spread["median"] <= spread["max"] and len(spread["passes"]) == 2
    assert table["speedup"] == spread["median"]                     # the headline: paired in time, pass by pass
    ident = table["identity"]                                       # counted apart, on one more frame than timed
    assert ident == {"frames": 3, "identical": {table["fastest_spec"]: 3}}
    calls, f = table["calls"]["w8a8"], table["formula"]["w8a8"][8]              # Figure 4's formula, our calls
    assert f["call_over_ar"] == pytest.approx(calls["by_n"][8]["call_ms"] / calls["ar_ms"])
    assert f["speedup"] == pytest.approx(table["systems"]["spec8@w8a8"]["tokens_per_step"] / f["call_over_ar"])
    load = table["machine"]["load"]                                  # the timing keeps its load, start and end
    assert load["start"] >= 0 and load["end"] >= 0 and "load average" in format_full_size(table).splitlines()[0]


def test_the_peers_stand_beside_our_loops(table):
    """ONNX Runtime's quantize_dynamic measured in the run (AR step and the q-row calls of the same trees), the
    read floor of the int8 step's weights, and the headline against the fastest AR frame of any engine."""
    peers, floor = table["peers"], table["floors"]
    ort = peers["onnxruntime-int8-dynamic"]
    assert ort["source"] == "this run" and ort["threads"] == torch.get_num_threads()
    assert ort["ar_step_ms"] > 0 and set(ort["q_call_ms"]) == {5, 9} and ort["frame_ms"] == 15 * ort["ar_step_ms"]
    assert floor["read"]["bytes"] == 5 * (1024 * 4096 + 2048 * 1024 + 1024 * 6144 + 3072 * 1024) + 1024 * 256
    assert floor["int8"] == pytest.approx(floor["read"]["ms"]) and floor["BF16"] == pytest.approx(2 * floor["int8"])
    for name, row in peers.items():
        assert row["floor_ms"] > 0 and row["engine"] in ("ONNX Runtime", "llama.cpp"), name
    frames = {**{k: s["frame_ms"] for k, s in table["systems"].items() if s["n"] == 0},
              **{k: r["frame_ms"] for k, r in peers.items()}}
    assert table["fastest_ar_any"] == min(frames, key=frames.get)
    assert table["speedup_any"] == pytest.approx(frames[table["fastest_ar_any"]]
                                                 / table["systems"][table["fastest_spec"]]["frame_ms"])


def test_the_story_reads_its_numbers(table):
    back = json.loads(json.dumps(table))                           # as metrics.json holds it: string keys
    text = full_size_md(back, "Measured on X")
    spec = back["fastest_spec"]
    assert f"**{back['speedup']:.2f}x** that AR loop" in text and spec in text and back["fastest_ar"] in text
    assert "Speculative frames equal to their own deployment's AR frames: 12 of 12" in text
    assert "projected" in text and f"{max(m['max_error'] for m in back['model'].values()):.1%}" in text
    rows = full_size_rows(back)
    assert [r["deployment"] for r in rows] == ["float32", "w8a8", "ort-w8a8"] and rows[1]["N=8 identical"] == "2/2"
    engines = engines_md(back, "Measured on X")
    assert f"**{back['speedup_any']:.2f}x** that loop" in engines and back["fastest_ar_any"] in engines
    assert [r["engine"] for r in peers_rows(back)][:3] == ["ours: float32", "ours: w8a8", "ours: ort-w8a8"]
    assert {"AR call ms", "AR call / floor"} <= set(peers_rows(back)[0])    # ours and the peers': calls, no sampling
    assert "AR step" not in engines + " ".join(peers_rows(back)[0]) and "15 of its AR calls" in engines
    assert "AR step" not in text and "a verify call costs more (here up to" in text
    assert "fastest AR" in format_full_size(table)
    full_size_figure(back)
