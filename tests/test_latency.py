"""The latency harness returns well-formed results (structure only: no timing is asserted)."""

import json

import torch

from conftest import SPECS, frame_inputs
from drafting import TABLE
from helpers.calibration import greedy_tree
from helpers.code_predictor import CodePredictor
from helpers.drafters import PositionOffsets
from helpers.artifacts import save_json
from helpers.latency import call_sweep, format_table, inner_loop, latency_table
from helpers.sampling import frame_uniforms
from helpers.tiny import build_tiny_talker


def test_sweep_and_inner_loop_structure(tmp_path):
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=0, dtype=torch.float32))
    drafter = PositionOffsets(cp)
    trees = {n: greedy_tree(TABLE, n) for n in (4, 8)}
    sweep = call_sweep(cp, drafter, trees, warmup=1, iters=3)
    assert sweep["ar"]["iters"] == 3 and set(sweep["trees"]) == {4, 8}
    assert sweep["trees"][8]["q"] == 9 and sweep["trees"][4]["call"]["p10"] <= sweep["trees"][4]["call"]["p90"]
    g, c0 = frame_inputs(spec, 3, seed=0, dtype=torch.float32)
    u = frame_uniforms(torch.Generator().manual_seed(0), batch=3)
    loop = inner_loop(cp, drafter, trees, g, c0, u, warmup_frames=1)
    assert loop["frames"] == 3 and loop["official_ms"] > 0 and loop["ar_over_official"] > 0
    assert all(r["identical"] and 1.0 <= r["toks_per_step"] <= 3.0 for r in loop["trees"].values())
    table = latency_table(sweep, loop)
    assert set(table["rows"][4]) >= {"call_ms_p50", "overhead", "toks_per_step", "realised_speedup",
                                      "measured_speedup"} and table["best_n"] in (4, 8)
    assert "best N" in format_table(table, loop)
    path = save_json(tmp_path / "bench" / "x.json", {"table": table})
    assert json.loads(path.read_text())["table"]["best_n"] == table["best_n"]
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
