"""Notebook 06's paragraphs (`helpers.report.nb06_latency`, `helpers.report.deployments`,
`helpers.report.projection`): built from the numbers they interpret, so a changed
number changes the sentence, and a timing is named once (AR call, AR step, frame)."""

import json
from pathlib import Path

import pytest

from helpers.report.deployments import deployments_md
from helpers.report.nb06_latency import best_md, profile_md, side_by_side_rows, sweep_md
from helpers.report.projection import bench_file, figure4_md
from helpers.report.paper import PAPER

ROOT = Path(__file__).resolve().parent.parent
PROFILE_AR = {"per_call_ms": 0.9, "layers": 0.6, "heads": 0.1, "sample": 0.12, "commit": 0.08, "prefill_ms": 1.1}
LAT = {"device": "cpu", "best_n": 8, "ar": {"call_ms_p50": 0.6, "frame_ms": 15.5}, "official": {"frame_ms": 34.9},
       "by_n": {4: {"overhead": 0.5, "tokens_per_step": 1.5, "realised_speedup": 1.0, "measured_speedup": 0.88,
                    "measured_over_tps": 0.59},
                8: {"overhead": 0.67, "tokens_per_step": 1.67, "realised_speedup": 1.0, "measured_speedup": 0.93,
                    "measured_over_tps": 0.56},
                32: {"overhead": 1.71, "tokens_per_step": 2.03, "realised_speedup": 0.75, "measured_speedup": 0.81,
                     "measured_over_tps": 0.40}},
       "profile": {"ar": PROFILE_AR, "trees": {8: {"ratio": 0.52, "ratio_free_host": 0.65,
                                                   "ratio_verify_only": 0.68}}}}


def test_the_sweep_and_the_best_n_read_off_their_numbers():
    m = {"dtype": "torch.float32", "calls": 200, "warmup": 20, "cuda_graph": False, "frames": 100}
    text = sweep_md(LAT, m, "Measured on X", "auto")
    assert text.startswith("Measured on X") and "*AR call* alone 0.600 ms" in text and "15.50 ms a frame" in text
    best = best_md(LAT, {})
    assert "more than the call's growth predicts at N = 32" in best and "less at N = 4, 8" in best
    assert "Below 1 (slower than the AR loop) at N = 4, 8, 32" in best and "N = 32: 2.47 (inferred)" in best


def test_the_profile_paragraph_names_the_two_harnesses_and_the_verify_bound():
    text = profile_md(LAT, 0.86, "Measured on X")
    assert f"**{1 / 0.68:.2f} AR steps**" in text and f"at most {1.67 * 0.68:.2f}x" in text
    assert "*AR call* (0.600 ms)" in text and "*AR step* (0.900 ms)" in text and "The step costs 1.50 AR calls" in text
    cheap = {**LAT, "profile": {**LAT["profile"], "trees": {8: {**LAT["profile"]["trees"][8], "ratio_verify_only": 0.95}}}}
    assert "little more than one" in profile_md(cheap, 0.86, "Measured on X")


def test_the_committed_bench_file_reads_as_a_projection_against_the_fastest_ar_call():
    assert bench_file() is not None and bench_file([ROOT / "nowhere.json"]) is None
    real = json.loads((ROOT / "outputs/bench-reference/cpu_0.6b.json").read_text())
    text = figure4_md(real, "Measured on X", PAPER["figure4_latency"]["devices"]["macbook_m3_pro"])
    fastest = min((k for k, v in real.items() if isinstance(v, dict) and "ar_ms" in v), key=lambda k: real[k]["ar_ms"])
    assert f"against the fastest AR call of the same grid ({fastest}" in text
    assert "(inferred)" in text and "x the AR call's products" in text


def test_deployments_and_side_by_side_rows():
    dep = {"phases": {"deployment": "w8a8", "by_n": {"0": {"projections_ms": 1.0, "call_ms": 2.0},
                                                    "16": {"projections_ms": 3.0, "call_ms": 4.0}}}}
    text = deployments_md(dep, 256, "S.")
    assert text.startswith("S.") and "50% of the AR call, 75% of the N = 16 call" in text
    both = {"fastest_ar": "ar", "systems": {"ar": {"frame_ms": 2.0}, "spec": {"frame_ms": 4.0}},
            "ratios": {"ar": {"ar": 1.0, "official": 3.0}, "spec": {"ar": 0.5}}}
    rows = side_by_side_rows(both)
    assert rows[1] == {"system": "spec", "frame_ms": 4.0, "official / it": None, "fastest AR / it": 0.5}
    assert rows[0]["fastest AR / it"] == pytest.approx(1.0)


def test_notebook_06_narrates_and_calls():
    """Issue 42's rule for 06: no code cell over 25 lines, no function defined and no loop statement in a cell."""
    import nbformat
    nb = nbformat.read(ROOT / "notebooks" / "06_latency.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        assert len(lines) <= 25, (cell.get("id"), len(lines))
        assert not any(line.lstrip().startswith(("def ", "for ", "while ")) for line in lines), cell.get("id")
