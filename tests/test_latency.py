"""The latency harness returns well-formed, self-consistent results (structure only: no timing is asserted)."""

import json
import math

import pytest
import torch

from conftest import SPECS, frame_inputs
from drafting import TABLE
from helpers.artifacts import save_json
from helpers.method.calibration import greedy_tree
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.method.drafters import PositionOffsets
from helpers.measure.latency import call_sweep, format_table, latency_metrics, latency_table
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.adapter.tiny import build_tiny_talker


@pytest.fixture(scope="module")
def setup():
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=0, dtype=torch.float32))
    drafter = PositionOffsets(cp, offsets=0.1 * torch.randn(3, spec.hidden_size, generator=torch.Generator().manual_seed(0)))
    trees = {n: greedy_tree(TABLE, n) for n in (4, 8)}
    g, c0 = frame_inputs(spec, 3, seed=0, dtype=torch.float32)
    return cp, drafter, trees, g, c0


def test_sweep_structure_and_expected_table(setup):
    cp, drafter, trees, _, _ = setup
    sweep = call_sweep(cp, drafter, trees, warmup=1, iters=3)
    assert sweep["ar"]["iters"] == 3 and set(sweep["trees"]) == {4, 8}
    assert sweep["trees"][8]["q"] == 9 and sweep["trees"][4]["call"]["p10"] <= sweep["trees"][4]["call"]["p90"]
    table = latency_table(sweep, tokens_per_step={4: 1.5, 8: 1.8})
    assert table["official"] is None and "frame_ms" not in table["ar"]
    for n, r in table["by_n"].items():
        assert math.isclose(r["realised_speedup"], r["tokens_per_step"] / (1 + r["overhead"]))
        assert "measured_speedup" not in r
    assert table["best_n"] == max(table["by_n"], key=lambda n: table["by_n"][n]["realised_speedup"])
    assert "best N" in format_table(table)


def test_latency_metrics_structure_and_consistency(setup, tmp_path):
    cp, drafter, trees, g, c0 = setup
    sampler = SamplerConfig()
    m = latency_metrics(cp, drafter, trees, g, c0, sampler, calls=3, warmup=1, seed=7)
    assert m["device"] == "cpu" and m["frames"] == 3 and m["cuda_graph"] is False and m["best_n"] in trees
    ar = m["ar"]
    assert ar["call_ms_p10"] <= ar["call_ms_p50"] <= ar["call_ms_p90"] and ar["frame_ms"] > 0
    assert m["official"]["frame_ms"] > 0 and math.isclose(m["official"]["over_ar"], m["official"]["frame_ms"] / ar["frame_ms"])
    u = frame_uniforms(torch.Generator().manual_seed(7), batch=3)
    for n, r in m["by_n"].items():
        assert set(r) >= {"call_ms_p50", "call_ms_p10", "call_ms_p90", "overhead", "tokens_per_step",
                          "realised_speedup", "measured_speedup"} and r["q"] == n + 1 and r["identical"]
        assert r["call_ms_p10"] <= r["call_ms_p50"] <= r["call_ms_p90"]
        assert math.isclose(r["overhead"], r["call_ms_p50"] / ar["call_ms_p50"] - 1)
        assert math.isclose(r["realised_speedup"], r["tokens_per_step"] / (1 + r["overhead"]))
        assert math.isclose(r["measured_speedup"], ar["frame_ms"] / r["frame_ms"])
        assert math.isclose(r["measured_over_tps"], r["measured_speedup"] / r["tokens_per_step"])
        # tokens/step is that of these very frames and uniforms
        dec = Decoder(cp, sampler, drafter, trees[n])
        calls = sum(dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]).calls for i in range(3))
        assert math.isclose(r["tokens_per_step"], 15 * 3 / calls)
    assert m["best_n"] == max(m["by_n"], key=lambda n: m["by_n"][n]["measured_speedup"])
    assert "meas/tps" in format_table(m)
    assert set(m["profile"]["trees"]) == set(trees) and m["profile"]["ar"]["steps"] == 14   # where time goes
    path = save_json(tmp_path / "bench" / "x.json", m)
    back = json.loads(path.read_text())
    assert back["best_n"] == m["best_n"] and set(back["by_n"]) == {str(n) for n in trees}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
