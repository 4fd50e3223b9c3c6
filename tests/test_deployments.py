"""Deployments side by side (`measure.deployments`) and Figure 4 for a CPU (`report.projection`): what make bench and
notebook 06 time and how the table beside the paper's devices is made of it."""

import math

import pytest
import torch

from drafting import TREES
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.measure.deployments import (DEPLOYMENTS, call_grid, call_phases, deployed,
                                         deployment_frames, format_frames, format_grid, format_phases, runnable,
                                         spread, spread_text)
from helpers.method.kernels import unsupported
from helpers.method.drafters import make_drafter
from helpers.method.stack import FusedCore
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import frame_uniforms
from helpers.report.projection import figure4_rows, projected
from helpers.report.paper import paper_tokens_per_step

SPEC = TinyTalkerSpec(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,
                      talker_hidden_size=32)


@pytest.fixture(scope="module")
def talker():
    return build_tiny_talker(SPEC, seed=0, dtype=torch.float32)


def test_deployments_share_one_copy_per_dtype_and_carry_the_trained_drafter(talker):
    base = CodePredictor.from_talker(talker)
    trained = make_drafter("offsets", base, 3)
    with torch.no_grad():
        trained.offsets.add_(1.0)
    before = {k: v.clone() for k, v in talker.state_dict().items()}
    systems = deployed(talker, trained, 3, names=runnable())
    for predictor, _ in systems.values():
        FusedCore(predictor)                                       # every kernel lays its weights out
    assert list(systems) == [n for n in DEPLOYMENTS if not unsupported(DEPLOYMENTS[n][1])]
    for name in set(DEPLOYMENTS) - set(systems):                    # this CPU cannot run its kernel: a clear refusal
        with pytest.raises(ValueError, match="cannot run here"):
            FusedCore(deployed(talker, trained, 3, names=[name])[name][0])
    for name, (predictor, drafter) in systems.items():
        dtype, kernel = DEPLOYMENTS[name]
        assert (predictor.dtype, predictor.kernel) == (dtype, kernel)
        assert torch.equal(drafter.offsets.float(), trained.offsets.float())
    assert systems["bfloat16"][0].official is systems["w8a16"][0].official          # kernels of a dtype share it
    assert all(torch.equal(v, before[k]) for k, v in talker.state_dict().items())   # the talker is never changed
    with pytest.raises(ValueError, match=r"deployments \['int4'\]: each must be one of"):
        deployed(talker, "reused", names=["int4"])


def test_the_call_grid_times_every_deployment_and_size_and_the_dense_ones_compiled(talker):
    systems = deployed(talker, "reused", names=["float32", "w8a8"])
    trees = {4: TREES["sparse4"], 16: TREES["sparse16"]}
    grid = call_grid(systems, trees, warmup=1, rounds=3, compiled_sizes=(4,))
    assert set(k for k in grid if isinstance(grid[k], dict)) == {"float32", "w8a8", "float32+inductor"}
    for name in ("float32", "w8a8"):
        rows = grid[name]["by_n"]
        assert set(rows) == {4, 16} and rows[16]["q"] == 17
        assert all(math.isclose(r["overhead"], r["call_ms"] / grid[name]["ar_ms"] - 1) for r in rows.values())
    assert set(grid["float32+inductor"]["by_n"]) == {4} and grid["float32+inductor"]["compile_s"] > 0
    assert "float32+inductor" in format_grid(grid) and grid["rounds"] == 3


def test_whole_frames_of_every_deployment_count_tokens_and_identical_frames(talker):
    systems = deployed(talker, "reused", names=runnable(["float32", "bfloat16", "bfloat16-prepacked"]))
    prepacked = "bfloat16-prepacked" in systems                    # where the CPU runs oneDNN's bfloat16 reorder
    frames = 4
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, frames,
                                torch.Generator().manual_seed(0), torch.float32)
    u = frame_uniforms(torch.Generator().manual_seed(1), batch=frames)
    out = deployment_frames(systems, {4: TREES["sparse4"]}, g, c0, u, warmup_frames=1, passes=2)
    assert set(out["systems"]) == {"official@float32", "official@bfloat16", "ar@float32", "spec4@float32",
                                   "ar@bfloat16", "spec4@bfloat16"} | (
        {"ar@bfloat16-prepacked", "spec4@bfloat16-prepacked"} if prepacked else set())
    assert out["systems"]["ar@float32"]["tokens_per_step"] == 1.0
    assert 1.0 < out["systems"]["spec4@float32"]["tokens_per_step"] <= 4.0
    # prepacked bfloat16 multiplies by the same bfloat16 weights: its AR frames are the dense bfloat16 ones
    assert not prepacked or out["identical"]["bfloat16-prepacked"]["ar_vs_dense"] == frames
    assert all(0 <= v <= frames for same in out["identical"].values() for v in same["spec"].values())
    fastest = out["fastest_spec"]
    assert out["ratios"]["spec_over_ar"] == pytest.approx(out["systems"][out["fastest_ar"]]["frame_ms"]
                                                          / out["systems"][fastest]["frame_ms"])
    assert fastest in format_frames(out)
    for r in out["systems"].values():                               # two passes over the same frames, their median
        assert len(r["passes_ms"]) == 2 and r["frame_ms"] == pytest.approx(sum(r["passes_ms"]) / 2)
    s = spread(out["systems"], out["fastest_ar"], fastest)
    assert s["passes"] == pytest.approx([a / b for a, b in zip(out["systems"][out["fastest_ar"]]["passes_ms"],
                                                                out["systems"][fastest]["passes_ms"])])
    assert "2 interleaved passes" in spread_text(s) and spread_text({**s, "passes": s["passes"][:1]}) == ""


def test_a_calls_phases_add_up(talker):
    predictor, _ = deployed(talker, "reused", names=["w8a8"])["w8a8"]
    phases = call_phases(predictor, {16: TREES["sparse16"]}, warmup=1, rounds=3)
    assert set(phases) == {0, 16} and phases[16]["q"] == 17
    for r in phases.values():
        assert r["projections_ms"] > 0 and r["heads_ms"] > 0
        assert r["call_ms"] == pytest.approx(r["projections_ms"] + r["attention_and_small_ops_ms"] + r["heads_ms"])
    assert "projections" in format_phases({"deployment": "w8a8", "by_n": phases})


def test_the_papers_tokens_per_step_only_where_the_paper_reports_it():
    assert paper_tokens_per_step(16) == pytest.approx(2.25) and paper_tokens_per_step(32) == pytest.approx(2.47)
    assert paper_tokens_per_step(64) == pytest.approx(2.60)
    assert all(paper_tokens_per_step(n) is None for n in (8, 15, 24, 31, 47, 63, 65))     # never interpolated


def test_projected_speedup_and_the_table_beside_the_papers_devices():
    grid = {"rounds": 3, "w8a8": {"ar_ms": 6.0, "by_n": {16: {"q": 17, "call_ms": 12.0, "overhead": 1.0},
                                                          32: {"q": 33, "call_ms": 18.0, "overhead": 2.0},
                                                          4: {"q": 5, "call_ms": 7.0, "overhead": 1 / 6}}},
            "w8a16": {"ar_ms": 8.0, "by_n": {16: {"q": 17, "call_ms": 16.0, "overhead": 1.0}}}}
    proj = projected(grid, tokens_per_step={4: 1.5, 16: 1.9})
    rows = proj["w8a8"]["by_n"]
    assert rows[32]["paper_speedup"] == pytest.approx(paper_tokens_per_step(32) / 3.0)
    assert rows[4]["paper_speedup"] is None and rows[4]["mini_speedup"] == pytest.approx(1.5 / (7 / 6))
    assert proj["w8a8"]["best_n"] == 16 and proj["w8a8"]["best_by"] == "paper_speedup"
    table = figure4_rows(grid, "this CPU")
    assert [r["source"] for r in table] == (["paper (speedups: Figure 4's formula)"] * 3
                                            + ["measured overhead x paper tokens/step"] * 2)
    m3 = next(r for r in table if r["device"].startswith("MacBook M3 Pro"))
    assert m3["overhead N=32"] == "+0.136" and m3["speedup N=32"] == "2.13x"
    iphone12 = next(r for r in table if r["device"].startswith("iPhone 12"))
    assert iphone12["overhead N=16"].endswith("(derived)")           # 2.25 / 1.82 - 1: not a number the paper prints
    w8a8 = table[3]
    assert w8a8["overhead N=16"] == "+1.000" and w8a8["overhead N=32"] == "+2.000"
    assert w8a8["speedup N=32"].endswith("x (inferred)")             # the ceiling at N = 32 is inferred
    with_mini = figure4_rows(grid, "this CPU", {16: 1.9, 32: 2.0})
    assert with_mini[3]["best N (miniature's tokens/step)"] == "16 (0.95x)" and with_mini[0][
        "best N (miniature's tokens/step)"] == "-"
    # against the fastest AR call of any deployment (w8a8's own 6 ms: every kernel's rows are its AR call's)
    assert w8a8["best N vs the grid's fastest AR call"] == f"16 ({paper_tokens_per_step(16) * 6.0 / 12.0:.2f}x)"


def test_report_sections_from_the_metrics_notebook_06_writes():
    from helpers.report.projection import figure4_report_lines as report_lines
    grid = {"w8a8": {"ar_ms": 6.0, "by_n": {"16": {"q": 17, "call_ms": 12.0, "overhead": 1.0},
                                            "32": {"q": 33, "call_ms": 18.0, "overhead": 2.0}}},
            "bfloat16": {"ar_ms": 10.0, "by_n": {"32": {"q": 33, "call_ms": 30.0, "overhead": 2.0}}}}
    proj = projected(grid)
    phases = {"deployment": "w8a8", "by_n": {"15": {"q": 16, "call_ms": 12.0, "projections_ms": 7.0,
                                                    "attention_and_small_ops_ms": 3.0, "heads_ms": 2.0}}}
    m = {"figure4_cpu": {"source": "outputs/bench/cpu_0.6b.json", "environment": {"threads": 1, "torch": "2.x",
                                                                                  "cpu_flags": ["avx512_bf16"]},
                         "grid": grid, "projected": proj, "phases": phases, "best": "w8a8"}}
    text = "\n".join(report_lines(m))
    assert "## Figure 4 for a CPU, at the 0.6B shape" in text and "MacBook M3 Pro" in text and "Measured on" in text
    assert f"the best is w8a8 at N = 16, {paper_tokens_per_step(16) / 2:.2f}x" in text and "bf16" in text
    assert f"**{paper_tokens_per_step(32) * 6 / 18:.2f}x** against the fastest AR call" in text   # w8a8's own 6 ms
    assert "projections 7.00" in text and report_lines({}) == []
    from helpers.report.projection import overhead_figure
    fig = overhead_figure(grid, "this CPU")                      # keys as JSON gives them back
    assert len(fig.axes[0].lines) == 2 and fig.axes[0].get_xscale() == "log"
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("derived from the paper") and "iPhone 12" in t for t in legend)
    assert not any(t.startswith("paper: iPhone 12") for t in legend)       # its overheads are derived, not printed
