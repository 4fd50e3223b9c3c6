"""`make bench-gpu` on this CPU (its eager modes), the shipped inner-loop pack it reads, the counts it prints, and the
committed GPU reference as notebook 06 and the README read it."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from drafting import TREES, random_drafters
from helpers.experiment.bench.inner_loop_pack import load_pack
from helpers.measure.kernel_counts import format_kernel_counts, kernel_counts
from helpers.method.decoding import Decoder
from helpers.method.sampler import frame_uniforms
from helpers.report.gpu_reference import (gpu_frame_rows, gpu_round_rows, gpu_sentence, gpu_summary,
                                          load_gpu_reference, odd_size_sentence, pack_tree_depths)
from test_compiled import SAMPLER, frames

ROOT = Path(__file__).resolve().parents[1]


def bench_gpu():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "scripts" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_pack_decodes_exactly():
    """The pack's miniature in float64: the frame decoder and the eager speculative decoder return the AR codes."""
    pack = load_pack(ROOT / "outputs" / "gpu-pack", dtype=torch.float64)
    p, d = pack.predictor, pack.drafters[pack.main]
    tree = pack.trees[pack.main][32]
    g, c0 = pack.g[:6], pack.c0[:6]
    u = frame_uniforms(torch.Generator().manual_seed(0), p.num_codes, batch=6)
    ar = Decoder(p, pack.sampler).decode_frame(g, c0, u).codes
    calls = 0
    for dec in (Decoder(p, pack.sampler, d, tree, "none", rounds_per_graph=(4, 1)), Decoder(p, pack.sampler, d, tree)):
        for i in range(6):
            r = dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
            assert torch.equal(r.codes[0], ar[i])
            calls += r.calls
    assert calls < 2 * 6 * 15, "the trained drafter never accepted a draft"
    with pytest.raises(FileNotFoundError, match="not an inner-loop pack"):
        load_pack(ROOT / "outputs")


def test_kernel_counts_count_what_a_graph_launches(tiny):
    spec, _, cp = tiny
    drafter = random_drafters(cp, seed=1)["offsets"]
    g, c0, u = frames(spec, 4, seed=3)
    counts = kernel_counts(cp, drafter, {4: TREES["sparse4"], 16: TREES["sparse16"]}, g, c0, u, SAMPLER, {4: 3, 16: 2})
    assert 0 < counts["prefill"] and 0 < counts["ar_step"] < counts["rounds"][4] <= counts["rounds"][16]
    reads = counts["reads"]
    assert reads["ar_eager"] == reads["ar_frame"] == 0
    assert 1 <= reads["spec4_frame"] <= reads["spec4"] and 1 <= reads["spec16_frame"] <= reads["spec16"]
    assert "host reads per frame" in format_kernel_counts(counts)


def test_bench_gpu_runs_here(tmp_path):
    """The command's CPU check: every part runs, the codes are the AR codes, the files say where they were made."""
    module = bench_gpu()
    rc = module.main(["--device", "cpu", "--quick", "--sizes", "4", "--frames", "2", "--iters", "2",
                      "--out", str(tmp_path)])
    out = json.loads((tmp_path / "bench_gpu.json").read_text())
    assert rc == 0 and not out["errors"], out["errors"]
    side = out["mini"]["side_by_side"]
    assert {"official", "ar", "spec4", "spec4_frame_none"} <= set(side["systems"])
    assert all(r["identical"] == side["frames"] for r in side["systems"].values() if r["identical"] is not None)
    assert out["mini"]["anatomy"]["rows"] and out["mini"]["kernels"]["rounds"]
    assert set(out["real"]["modes"]["none"]["projection"]) == {"16", "32"}
    full = out["full"]["side_by_side"]                      # the miniature at the real size: frames measured
    assert out["full"]["shape"]["hidden_size"] == 1024 and {"ar", "spec4", "spec4_frame_none"} <= set(full["systems"])
    assert all(r["identical"] == full["frames"] for r in full["systems"].values() if r["identical"] is not None)
    exact = out["exact"]
    assert exact["full_size_identical_to_miniature"] == exact["full_frames"] == 2
    assert exact["identical"]["full_spec4_frame_none"] == 2
    text = (tmp_path / "bench_gpu.md").read_text()
    assert "Measured on" in text and "0.6B shape" in text and "real code predictor's size" in text


def test_bench_gpu_names_what_is_missing(monkeypatch, capsys):
    module = bench_gpu()
    monkeypatch.setattr(module, "NEEDS", module.NEEDS + ("no_such_package_here",))
    assert module.main(["--device", "cpu", "--quick"]) == 2
    assert "no_such_package_here" in capsys.readouterr().err


def test_the_committed_gpu_reference_reads_as_it_says():
    """Notebook 06 and the README read outputs/gpu-reference/: every row labelled, the sentence from its numbers."""
    gpu = load_gpu_reference()
    assert gpu is not None and gpu["device"].startswith("NVIDIA") and not gpu["errors"]
    s = gpu_summary(gpu)
    side = gpu["mini"]["side_by_side"]
    assert all(r["identical"] == side["frames"] for r in side["systems"].values() if r["identical"] is not None)
    assert len(gpu_frame_rows(gpu)) == len(side["systems"]) and gpu_round_rows(gpu)
    sentence = gpu_sentence(gpu)
    assert sentence.startswith(f"Measured on {gpu['device']}")
    assert s["real_projected_vs_fastest"] <= s["real_projected"] + 1e-12      # never flattered by a slow AR call
    for value in (s["real_verify_over_ar"], s["real_round_over_ar"], s["real_projected"], s["speedup"], s["ceiling"],
                  s["real_projected_vs_fastest"], s["real_formula"]):
        assert f"{value:.2f}" in sentence
    assert s["real_formula"] == pytest.approx(s["paper_tokens_per_step"] / s["real_verify_over_ar"])   # like with like
    assert "2.13x by Figure 4's formula" in sentence and "Figure 4's formula on these calls" not in sentence
    assert "AR call" not in sentence.replace("AR call alone", "").replace("captured AR call with", "")   # all steps
    assert f"{s['real_verify_over_ar']:.2f} AR steps" in sentence
    assert f"{s['mini_verify_over_ar']:.2f} AR steps" in sentence
    assert "Its denominator is the verify call over an AR step, not over an AR call alone" in sentence
    assert "holds no captured AR call alone" in sentence
    rows = gpu_round_rows(gpu)
    assert {"AR step ms", "verify / AR step", "round / AR step"} <= set(rows[0]) and "AR call ms" not in rows[0]
    assert ("no faster than" in sentence) == (s["speedup"] <= 1.0)
    exact = load_gpu_reference(Path(ROOT / "outputs" / "gpu-reference" / "exact_float64.json"))
    assert exact["exact"]["dtype"] == "float64" and {"cuda_graph", "inductor_graph"} <= {
        name.rsplit("_", 2)[-2] + "_graph" for name in exact["exact"]["identical"] if name.endswith("_graph")}
    assert all(n == exact["exact"]["frames"] for n in exact["exact"]["identical"].values())


def test_the_odd_size_is_said_from_the_reference_and_its_pack():
    """N = 8 (q = 9) costs twice N = 16's verify in cuda_graph: the sentence says what the data rule out (a deeper
    tree, more operations, more round work), that frames show it too, and that no kernel was measured."""
    gpu = load_gpu_reference()
    depths = pack_tree_depths(gpu)
    assert (depths[8], depths[16], depths[32]) == (2, 2, 3)            # the pack the reference ran (its args.pack)
    text = odd_size_sentence(gpu, depths)
    trees = gpu["mini"]["round_parts"]["cuda_graph"]["trees"]
    assert text.startswith(f"At N = 8 (q = 9) the captured verify call (cuda_graph) costs "
                           f"{trees['8']['verify_ms']:.2f} ms against {trees['16']['verify_ms']:.2f} and "
                           f"{trees['32']['verify_ms']:.2f} ms at N = 16 and 32")
    assert "although its tree is no deeper (depth 2, against 2 and 3)" in text
    assert "its round dispatches no more operations (164, against 164 and 166)" in text
    assert "the extra time is in the call's GPU work at 9 rows" in text and "was not measured" in text
    assert "slow at 9 rows" not in text
    assert "although its tree" not in odd_size_sentence(gpu)                # without the pack: only what the file shows
    deeper = {8: 3, 16: 2, 32: 2}
    assert "; its tree is deeper (depth 3, against 2 and 2)" in odd_size_sentence(gpu, deeper)
    assert odd_size_sentence(gpu, depths, odd=3.0) == ""                     # no N costs 3x every larger N's
    assert pack_tree_depths({**gpu, "args": {"pack": "no/such/pack"}}) is None
