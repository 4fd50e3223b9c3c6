"""The paper's four figures (helpers.report.decoding_figures, helpers.report.speed_figures) build from real decoded
rounds (helpers.measure.walkthrough) and a real latency run, with labelled axes; the round recorder
(helpers.method.round_records) reproduces what the decoder did."""

import pytest
import torch

from conftest import SPECS, frame_inputs
from helpers.adapter.tiny import build_tiny_talker
from helpers.measure import walkthrough
from helpers.measure.latency import latency_metrics
from helpers.method.calibration import REFERENCE_TABLE, greedy_tree
from helpers.method.decoding import Decoder
from helpers.method.drafters import PositionOffsets, ReusedHeads
from helpers.method.predictor import CodePredictor
from helpers.method.round_records import round_records
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.report import decoding_figures, plots, speed_figures
from helpers.report.paper import PAPER, paper_figure4

FRAMES = 6


@pytest.fixture(scope="module")
def run():
    spec = SPECS["h64"]
    talker = build_tiny_talker(spec, seed=1, dtype=torch.float64)
    predictor = CodePredictor.from_talker(talker)
    g, c0 = frame_inputs(spec, FRAMES, seed=0)
    u = frame_uniforms(torch.Generator().manual_seed(0), predictor.num_codes, batch=FRAMES)
    return talker, predictor, g, c0, u


@pytest.mark.parametrize("kind", ["offsets", "reused"])
def test_round_records_are_the_rounds_that_ran(run, kind):
    talker, predictor, g, c0, u = run
    drafter = (PositionOffsets if kind == "offsets" else ReusedHeads)(predictor, 3)
    dec = Decoder(predictor, SamplerConfig(), drafter, greedy_tree(REFERENCE_TABLE, 8))
    ar = Decoder(predictor, SamplerConfig())
    for j in range(FRAMES):
        res = dec.decode_frame(g[j:j + 1], c0[j:j + 1], u[j:j + 1])
        codes = res.codes[0].tolist()
        assert codes == ar.decode_frame(g[j:j + 1], c0[j:j + 1], u[j:j + 1]).codes[0].tolist()
        recs = round_records(dec, res)
        assert [r.accepted for r in recs] == res.accepted[:len(recs)] and len(recs) >= 1
        for r in recs:
            q = len(r.tokens)
            assert r.tokens[0] == codes[r.t - 1] and r.committed == codes[r.t:r.t + r.accepted + 1]
            assert r.positions == [r.t + 1 + d for d in r.depth] and r.cache_length == r.t + 1
            assert tuple(r.visible.shape) == (q, predictor.slots + q)
            assert r.visible[:, :r.cache_length].all() and not r.visible[:, r.cache_length:predictor.slots].any()
            tree_mask = dec.index(r.t).tree.mask.to(r.visible.device)
            assert torch.equal(r.visible[:, predictor.slots:], tree_mask)
            path = r.accepted_path
            assert path[0] == 0 and [r.depth[i] for i in path] == list(range(len(path)))
            assert [r.tokens[i] for i in path[1:]] == r.committed[:-1]          # accepted drafts are the codes
            for i in path[1:]:                                                    # each a child of the previous
                assert r.paths[i][:-1] == r.paths[path[path.index(i) - 1]]
            for d, row in enumerate(r.drafts):
                nodes = [i for i in range(1, q) if r.depth[i] == d + 1]
                assert all(r.tokens[i] == row[r.paths[i][-1]] for i in nodes)


def test_round_records_refuse_codes_the_walk_cannot_commit(run):
    talker, predictor, g, c0, u = run
    dec = Decoder(predictor, SamplerConfig(), PositionOffsets(predictor, 3), greedy_tree(REFERENCE_TABLE, 8))
    res = dec.decode_frame(g[:1], c0[:1], u[:1])
    res.accepted = [a + 1 for a in res.accepted]            # claims more accepted drafts than the tree carried
    with pytest.raises(AssertionError, match="the walk over the recorded codes"):
        round_records(dec, res)


def labelled(ax) -> bool:
    return bool(ax.get_xlabel()) and bool(ax.get_ylabel())


def test_loop_calls_reproduce_the_papers_arithmetic():
    c = walkthrough.loop_calls(12.5, 15, PAPER["figure4_latency"]["acceptance_ceiling"][32])
    assert c["ar"]["per_second"]["total"] == 200 and c["ar"]["per_second"]["inner"] == 187.5
    assert round(c["speculative"]["per_second"]["total"]) == PAPER["inner_loop"]["sequential_calls_per_second_with_speculation"]
    with pytest.raises(ValueError, match="tokens_per_step"):
        walkthrough.loop_calls(12.5, 15, 0.5)


def test_figures_1_to_3_build_from_a_real_round(run):
    talker, predictor, g, c0, u = run
    dec = Decoder(predictor, SamplerConfig(), PositionOffsets(predictor, 3), greedy_tree(REFERENCE_TABLE, 8))
    res = dec.decode_frame(g[:1], c0[:1], u[:1])
    rec = round_records(dec, res)[0]
    fig1 = decoding_figures.nested_loops(walkthrough.loop_calls(12.5, 15, res.tokens_per_step), "this run",
                                         walkthrough.loop_calls(12.5, 15, 2.47))
    schematic, bars = fig1.axes
    assert schematic.get_title() and bars.get_ylabel() and len(bars.get_xticklabels()) == 3
    fig2 = decoding_figures.tree_packing(rec, int(c0[0]), res.codes[0].tolist())
    tree_ax, mask_ax = fig2.axes[:2]
    assert tree_ax.get_xlabel() and labelled(mask_ax)
    assert len(mask_ax.get_xticklabels()) == rec.cache_length + len(rec.tokens)
    assert len(mask_ax.get_yticklabels()) == len(rec.tokens)
    assert mask_ax.get_xticklabels()[0].get_text() == "g@0"
    fig3 = decoding_figures.one_call(rec, predictor.hidden_size, 3)
    texts = [t.get_text() for t in fig3.axes[0].texts]
    assert f"c{rec.t} = {rec.tokens[0]}" in texts and any("offset" in t for t in texts)
    assert sum(t == f"head of c{rec.t + j}" for t in texts for j in range(1, 4)) == len(rec.drafts) == 3
    assert any(f"3 x {predictor.hidden_size}\n= {3 * predictor.hidden_size}" in t for t in texts)


def test_figure4_builds_from_a_real_latency_run_with_the_papers_devices(run):
    talker, predictor, g, c0, u = run
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in (4, 8)}
    deployed = CodePredictor.from_talker(talker, dtype=torch.float32)
    lat = latency_metrics(deployed, PositionOffsets(deployed, 3), trees, g[:2].float(), c0[:2],
                          calls=2, warmup=1, official=False, profile_frames=1)
    paper = paper_figure4(PAPER["figure4_latency"])
    assert paper["devices"]["iphone_12"]["derived"][16] == pytest.approx(2.25 / 1.82 - 1)
    assert paper["devices"]["macbook_m3_pro"]["overhead"] == {32: 0.136}
    fig = speed_figures.speedup_and_overhead(lat["by_n"], lat["device"], lat["frames"], 2, paper)
    speed, cost = fig.axes
    assert labelled(speed) and labelled(cost) and cost.get_xscale() == cost.get_yscale() == "log"
    assert [t.get_text() for t in cost.get_xticklabels()] == ["1", "5", "9", "17", "33", "65"]
    labels = [t.get_text() for t in speed.get_legend().get_texts()]
    assert "this run: tokens/step (its ceiling), 2 frames" in labels and "paper: tokens/step (its ceiling)" in labels
    cost_labels = cost.get_legend_handles_labels()[1]
    assert sum(lab.startswith("paper: ") for lab in cost_labels) == 2             # printed by the paper
    assert sum(lab.startswith("derived from the paper") for lab in cost_labels) == 1   # the iPhone 12's, derived
    joined = [line.get_label() for line in speed.get_lines() + cost.get_lines()]
    assert not any(lab.startswith(("paper", "inferred")) for lab in joined)      # the paper's points, not joined


def test_example_round_is_the_first_with_accepted_drafts(run):
    talker, predictor, g, c0, u = run
    dec = Decoder(predictor, SamplerConfig(), PositionOffsets(predictor, 3), greedy_tree(REFERENCE_TABLE, 8))
    f, i, rec, res = walkthrough.example_round(dec, g, c0, u)
    assert rec.accepted >= 1 and round_records(dec, res)[i].accepted == rec.accepted
    for earlier in range(f):                                      # no earlier frame had an accepted draft
        assert max(dec.decode_frame(g[earlier:earlier + 1], c0[earlier:earlier + 1], u[earlier:earlier + 1]).accepted) == 0
    f, i, rec, res = walkthrough.example_round(dec, g, c0, u, min_accepted=99)
    assert (f, i) == (0, 0)


def test_frames_tokens_per_step_counts_the_decoders_calls(run):
    from drafting import OracleDrafter
    from helpers.method.tree import SparseTree
    talker, predictor, g, c0, u = run
    oracle = OracleDrafter(predictor, 3)                       # always drafts the true code at rank 0
    u0 = frame_uniforms(torch.Generator().manual_seed(5), predictor.num_codes, batch=1)
    oracle.codes = Decoder(predictor, SamplerConfig()).decode_frame(g[:1], c0[:1], u0).codes[0]
    dec = Decoder(predictor, SamplerConfig(), oracle, SparseTree.chain(3))
    assert walkthrough.frames_tokens_per_step(dec, g[:1], c0[:1], seed=5) == 3.0   # prefill + 4 rounds: c1 | 4 | 4 | 4 | 2


def _overlapping_labels(fig, ax, axis="x") -> list[tuple[str, str]]:
    """Pairs of neighbouring tick labels of `ax` whose drawn boxes overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()) if t.get_text()]
    boxes = sorted(((t.get_window_extent(renderer), t.get_text()) for t in labels),
                   key=lambda b: b[0].x0 if axis == "x" else b[0].y0)
    return [(a[1], b[1]) for a, b in zip(boxes, boxes[1:]) if a[0].overlaps(b[0])]


def test_tick_labels_of_close_tree_sizes_never_collide():
    from helpers.report.projection import overhead_figure
    ns = [4, 8, 15, 16, 31, 32, 47, 63, 64]
    by_n = {n: {"tokens_per_step": 1 + 0.3 * i, "realised_speedup": 1.0, "overhead": 0.1 * i, "measured_speedup": 1.1}
            for i, n in enumerate(ns)}
    fig = speed_figures.speedup_and_overhead(by_n, "cpu", 10, 10, paper_figure4(PAPER["figure4_latency"]))
    speed, cost = fig.axes
    assert not _overlapping_labels(fig, speed) and not _overlapping_labels(fig, cost)
    assert not _overlapping_labels(fig, cost, "y")
    assert [t.get_text() for t in speed.get_xticklabels()] == ["4", "8", "16", "32", "47", "64"]
    assert sorted(speed.get_xticks(minor=True)) == [15, 31, 63]           # the rest: unlabelled, still ticked
    fig = plots.tokens_vs_tree_size({"offsets": {n: 1 + 0.1 * i for i, n in enumerate(ns)}})
    assert not _overlapping_labels(fig, fig.axes[0])
    row = {"layers": 1.0, "heads": 0.2, "sample": 0.1, "draft": 0.01, "walk": 0.01, "commit": 0.01, "ratio": 0.5}
    fig = speed_figures.round_phases({"ar": row, "trees": {str(n): row for n in ns}}, "cpu")
    ax = fig.axes[0]
    assert not _overlapping_labels(fig, ax) and [t.get_text() for t in ax.get_xticklabels()][1:] == [str(n) for n in ns]
    assert ax.get_xlabel() and ax.get_ylabel()
    grid = {"w8a8": {"ar_ms": 6.0, "by_n": {str(n): {"q": n + 1, "call_ms": 6.0 * (1 + 0.1 * i), "overhead": 0.1 * i}
                                            for i, n in enumerate(ns)}}}
    fig = overhead_figure(grid, "this CPU")
    assert not _overlapping_labels(fig, fig.axes[0]) and not _overlapping_labels(fig, fig.axes[0], "y")


def test_position_axes_tick_integers_and_legends_leave_the_data_alone():
    fig = plots.topm_accuracy({"a": [[0.3, 0.2, 0.1, 0.1, 0.05]] * 3, "b": [[0.2, 0.2, 0.1, 0.1, 0.1]] * 3}, "t")
    for ax in fig.axes:
        assert all(float(x).is_integer() for x in ax.get_xticks()) and ax.get_legend() is None
    assert len(fig.legends) == 1
    fig = plots.target_sharpness([2.5, 1.5, 1.2], [0.3, 0.5, 0.6])
    ent, top = fig.axes
    assert "nats" in ent.get_ylabel() and top.get_ylabel() == "top probability" and top.get_ylim() == (0, 1)
    fig = plots.loss_curves({"offsets": [float(100 - i % 7) for i in range(300)]}, window=20)
    ax = fig.axes[0]
    assert "running mean over 20 steps" in ax.get_legend().get_title().get_text()
    assert len(ax.lines[1].get_xdata()) == 300 - 20 + 1 and ax.lines[1].get_xdata()[0] == 20
