"""Notebook 06's paragraphs (`helpers.report.nb06_latency`, `helpers.report.deployments`,
`helpers.report.projection`): built from the numbers they interpret, so a changed
number changes the sentence, and a timing is named once (AR call, AR step, frame)."""

import json
from pathlib import Path

import pytest

from helpers.report.deployments import deployment_calls_md, deployments_md, phase_split_sentence
from helpers.report.latency_sweep import dips, sweep_timing_sentence
from helpers.report.nb06_latency import best_md, compiled_skipped, profile_md, side_by_side_rows, sweep_md
from helpers.report.projection import bench_file, figure4_md, figure4_report_lines
from helpers.report.paper import PAPER

ROOT = Path(__file__).resolve().parent.parent
PROFILE_AR = {"per_call_ms": 0.9, "layers": 0.6, "heads": 0.1, "sample": 0.12, "commit": 0.08, "prefill_ms": 1.1}
LAT = {"device": "cpu", "best_n": 8, "ar": {"call_ms_p50": 0.6, "frame_ms": 15.5}, "official": {"frame_ms": 34.9},
       "by_n": {4: {"call_ms_p50": 0.9, "overhead": 0.5, "tokens_per_step": 1.5, "realised_speedup": 1.0,
                    "measured_speedup": 0.88, "measured_over_tps": 0.59},
                8: {"call_ms_p50": 1.0, "overhead": 0.67, "tokens_per_step": 1.67, "realised_speedup": 1.0,
                    "measured_speedup": 0.93, "measured_over_tps": 0.56},
                32: {"call_ms_p50": 1.63, "overhead": 1.71, "tokens_per_step": 2.03, "realised_speedup": 0.75,
                     "measured_speedup": 0.81, "measured_over_tps": 0.40}},
       "profile": {"ar": PROFILE_AR, "trees": {8: {"ratio": 0.52, "ratio_free_host": 0.65, "ratio_verify_only": 0.68,
                                                   "layers": 1.1, "heads": 0.15, "draft": 0.1, "sample": 0.2,
                                                   "walk": 0.05, "commit": 0.06}}}}


def test_the_sweep_and_the_best_n_read_off_their_numbers():
    m = {"dtype": "torch.float32", "calls": 200, "warmup": 20, "cuda_graph": False, "frames": 100}
    text = sweep_md(LAT, m, "Measured on X", "auto")
    assert text.startswith("Measured on X") and "*AR call* alone 0.600 ms" in text and "15.50 ms a frame" in text
    best = best_md(LAT, {})
    assert "more than the call's growth predicts at N = 32" in best and "less at N = 4, 8" in best
    assert "Below 1 (slower than the AR loop) at N = 4, 8, 32" in best and "N = 32: 2.47 (inferred)" in best


def test_the_profile_paragraph_names_the_two_harnesses_and_the_verify_bound():
    text = profile_md(LAT, 0.86, "Measured on X")
    assert f"would cost **{1 / 0.68:.2f} AR steps**" in text and f"at most {1.67 * 0.68:.2f}x" in text
    assert "only its larger layers (the decoder stack over 9 tokens" in text        # what 1 / ratio_verify_only is
    assert f"layers and heads timed inside the round, costs {1.25 / 0.9:.2f} AR steps" in text
    assert "verify call over 9 tokens alone" not in text
    assert "*AR call* (0.600 ms)" in text and "*AR step* (0.900 ms)" in text
    assert "which is why" not in text                  # a larger unit does not explain a larger count
    assert "The round costs 1.92 AR steps while its call alone costs 1.67 AR calls" in text
    assert "(0.41 ms: draft 0.100, sample 0.200, walk 0.050, commit 0.060)" in text
    assert "(layers and heads 1.250 ms), takes more than alone in the sweep (1.000 ms)" in text
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


def test_the_sweep_says_how_it_times_and_names_an_n_cheaper_than_a_smaller_one():
    by_n = {4: {"call_ms_p50": 0.990}, 8: {"call_ms_p50": 1.127}, 15: {"call_ms_p50": 1.220},
            16: {"call_ms_p50": 0.903}, 31: {"call_ms_p50": 1.572}}
    assert dips(by_n, 0.791) == {16: [4, 8, 15]}
    text = sweep_timing_sentence(by_n, 200, 20, 0.791)
    assert "its own block, one block after another: 20 warm-ups, then 200 calls of the same call back to back" in text
    assert "N = 16's p50 (0.903 ms) is below N = 4's, N = 8's, N = 15's (0.990, 1.127, 1.220 ms)" in text
    assert "compare milliseconds and overheads within one table" in text
    assert dips({"4": {"call_ms_p50": 0.5}}, 0.6) == {4: [0]}
    assert "N = 4's p50 (0.500 ms) is below the AR call's (0.600 ms)" in sweep_timing_sentence(
        {"4": {"call_ms_p50": 0.5}}, 200, 20, 0.6)
    rising = sweep_timing_sentence({4: {"call_ms_p50": 0.9}, 8: {"call_ms_p50": 1.0}}, 200, 20, 0.6)
    assert "is below" not in rising and "each N's p50 is at least every smaller N's" in rising
    m = {"dtype": "torch.float32", "calls": 200, "warmup": 20, "cuda_graph": False, "frames": 100}
    dipped = {**LAT, "by_n": {**LAT["by_n"], 32: {**LAT["by_n"][32], "call_ms_p50": 0.95}}}
    assert "N = 32's p50 (0.950 ms) is below N = 8's (1.000 ms)" in sweep_md(dipped, m, "Measured on X", "auto")


DEP = {"left_out": {}, "machine": {"load": {"start": 1.37, "end": 1.01}},
       "calls": {"rounds": 50, "warmup": 5, "t": 1,
                 "float32": {"ar_ms": 0.958, "by_n": {"8": {"q": 9, "call_ms": 1.519, "overhead": 0.59}}},
                 "w8a8": {"ar_ms": 1.2, "by_n": {"8": {"q": 9, "call_ms": 1.5, "overhead": 0.25}}}},
       "phases": {"deployment": "float32", "by_n": {"0": {"call_ms": 0.781, "projections_ms": 0.14},
                                                   "8": {"call_ms": 1.112, "projections_ms": 0.25}}}}


def test_the_grid_and_the_phase_split_say_how_they_time():
    sweep = {"dtype": "torch.float32", "ar_call_ms_p50": 0.586, "machine": {"load": {"start": 1.94, "end": 1.37}}}
    text = deployment_calls_md(DEP, "Measured on X", "<calls>", "<phases>", sweep=sweep)
    assert "(2 deployments, 4 calls) run once per round in a shuffled order, 50 rounds after 5" in text
    assert "not back to back with itself as in the latency sweep above" in text
    assert ("The float32 AR call reads 0.958 ms here against 0.586 ms in the sweep, although the load average was "
            "lower here.") in text
    assert "Compare milliseconds and overheads within one table, not across the two." in text
    busier = {**sweep, "machine": {"load": {"start": 0.5, "end": 0.4}}}
    assert "although" not in deployment_calls_md(DEP, "Measured on X", "", "", sweep=busier)
    assert "reads" not in deployment_calls_md(DEP, "Measured on X", "", "")           # no sweep: nothing to set beside
    split = phase_split_sentence(DEP["calls"], DEP["phases"])
    assert split.startswith("The phase split is its own measurement: float32's calls (N = 0, 8) alone")
    assert "layers and heads timed apart and their medians added" in split
    assert "(the AR call: 0.78 ms against 0.96; N = 8: 1.11 ms against 1.52)" in split and split in text


def test_the_0_6b_phase_split_is_set_beside_the_grid_from_the_file():
    real = json.loads((ROOT / "outputs/bench-reference/cpu_0.6b.json").read_text())
    text = figure4_md(real, "Measured on X", PAPER["figure4_latency"]["devices"]["macbook_m3_pro"])
    name, by_n = real["phases"]["deployment"], real["phases"]["by_n"]
    pair = f"the AR call: {by_n['0']['call_ms']:.2f} ms against {real[name]['ar_ms']:.2f}"
    assert pair in text and text.index("The phase split is its own measurement") < text.index("Where the call's time")
    n32 = f"N = 32: {by_n['32']['call_ms']:.2f} ms against {real[name]['by_n']['32']['call_ms']:.2f}"
    assert n32 in text
    m = json.loads((ROOT / "outputs/mini-reference/metrics.json").read_text())
    assert "The phase split is its own measurement" in "\n".join(figure4_report_lines(m))


def test_the_skipped_compiled_section_says_where_its_numbers_are():
    real = {"float32": {"ar_ms": 1.0}, "float32+inductor": {"ar_ms": 0.9}, "bfloat16+inductor": {"ar_ms": 0.8},
            "phases": {}}
    text = compiled_skipped("none", "auto", "cpu", real, {"device": "NVIDIA H200"})
    assert text.startswith("Compiled calls not timed in this run: compile = none, and CUDA graphs are off on a CPU "
                           "(cuda_graph = auto).")
    assert "the GPU reference's, in the next section" in text and "measured on NVIDIA H200" in text
    assert '"bfloat16+inductor" and "float32+inductor" rows of the 0.6B-shape table above' in text
    assert "`-p compile inductor`" in text and "`make bench` (its output is not committed)" in text
    assert "/" not in text                                                            # no path of any machine
    bare = compiled_skipped("none", "off", "cuda", None, None)
    assert "off on cuda (cuda_graph = off)" in bare and "No compiled numbers are committed beside this run" in bare
