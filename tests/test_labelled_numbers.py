"""Where a number comes from: the machine of every latency (`helpers.measure.machine`) and the labels the notebook
check asks for (`helpers.experiment.run.labelled_numbers`), on small notebooks built here."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from helpers.experiment.run.labelled_numbers import label_problems
from helpers.measure.machine import MATRIX_FLAGS, extensions, machine, machine_name, measured_on

POINTS = {16, 32, 64}


def notebook(*texts, kind="text/markdown"):
    cells = [new_code_cell("x", outputs=[new_output("display_data", data={kind: t})]) for t in texts]
    return new_notebook(cells=cells)


def test_this_machine_is_named_with_its_matrix_extensions():
    info = machine()
    assert set(info["cpu_flags"]) <= set(MATRIX_FLAGS) and info["cores"] >= 1 and info["threads"] >= 1
    assert measured_on(info).startswith(f"Measured on {info['cpu_model']} (")


def test_extensions_and_an_older_files_environment():
    assert extensions(["amx_tile", "avx512f", "avx512_bf16", "avx512_vnni"]) == "AMX, AVX-512, bf16, VNNI"
    assert extensions(["avx2"]) == "AVX2; no AMX" and extensions(["avx2", "avx512f"]) == "AVX-512; no AMX"
    old = {"cpu_flags": ["avx512f", "avx_vnni"], "threads": 1}           # written before the model was recorded
    assert machine_name(old) == "a CPU whose model was not recorded (AVX-512, VNNI; no AMX)"
    assert measured_on(old, ", read from a file") == (
        "Measured on a CPU whose model was not recorded (AVX-512, VNNI; no AMX), 1 thread, read from a file")
    assert machine_name({"cuda": "NVIDIA H200"}) == "NVIDIA H200" and machine_name(None) == "an unrecorded machine"


def test_a_timing_names_its_load_and_says_where_other_work_slowed_it():
    from helpers.measure.machine import load_average, timed_on

    quiet = {"cpu_model": "X", "cores": 2, "threads": 1, "load": {"start": 0.2, "end": 0.9}}
    assert measured_on(quiet) == "Measured on X (2 cores; no AVX2; no AMX), 1 thread, load average 0.20 to 0.90"
    busy = {**quiet, "load": {"start": 0.2, "end": 1.3}}
    assert measured_on(busy).endswith("load average 0.20 to 1.30 (over half of its 2 cores)")
    info = timed_on(load_average())
    assert info["load"]["start"] >= 0 and info["load"]["end"] >= 0 and "load average" in measured_on(info)


def test_a_latency_needs_its_machine_in_the_same_output_or_report_section():
    bare = ["AR call p50 0.911 ms", "| system | frame ms |\n|---|---|\n| ar | 17.6 |", "call_ms_p50: 2.27"]
    for text in bare:
        assert len(label_problems(notebook(text), POINTS)) == 1, text
    assert label_problems(notebook("Measured on AMD EPYC (2 cores), 1 thread: AR call 0.9 ms"), POINTS) == []
    report = "# Report\n\nMeasured on X: 3 ms\n\n## Latency\n\n| N | call ms |\n|---|---|\n| 4 | 1.3 |"
    assert len(label_problems(notebook(report), POINTS)) == 1          # the second section names no machine
    assert label_problems(notebook("RMSNorm, items, 12 tokens/step"), POINTS) == []


def test_the_papers_tokens_per_step_only_at_its_points_unless_labelled():
    assert label_problems(notebook("the paper's tokens/step at N = 32: 2.47"), POINTS) == []
    assert len(label_problems(notebook("1.45x with the paper's tokens/step at N = 15"), POINTS)) == 1
    assert label_problems(notebook("1.45x with the paper's tokens/step at N = 15 (interpolated)"), POINTS) == []
    table = ("| device | best N (speedup) | source |\n|---|---|---|\n"
             "| cpu | 15 (1.45x) | measured overhead x paper tokens/step |\n| M3 | 32 (2.13x) | paper |")
    problems = label_problems(notebook(table), POINTS)
    assert len(problems) == 1 and "N = 15" in problems[0]
    assert label_problems(notebook(table.replace("15 (1.45x)", "16 (1.40x)")), POINTS) == []
    mini = table.replace("| source |", "| best N (miniature's tokens/step) | source |").replace("|---|---|---|", "|---|---|---|---|")
    mini = mini.replace("| measured overhead", "| 4 (1.2x) | measured overhead").replace("| paper |", "| - | paper |")
    assert len(label_problems(notebook(mini), POINTS)) == 1            # N = 15 still; the miniature's N = 4 is its own
    text = "Best: 1.44x with the paper's tokens/step at N = 16. Where the time goes: N = 0: 2 ms, N = 15: 3 ms."
    assert label_problems(notebook("Measured on X. " + text), POINTS) == []      # another sentence, not the paper's


def test_stream_outputs_are_checked_too():
    nb = new_notebook(cells=[new_code_cell("x", outputs=[new_output("stream", name="stdout", text="AR 3.1 ms\n")])])
    assert len(label_problems(nbformat.from_dict(nb), POINTS)) == 1


def test_a_duration_needs_its_machine_too():
    for text in ("the recogniser took 129 s", "make test-fast takes about 7.4 min"):
        assert len(label_problems(notebook(text), POINTS)) == 1, text
    assert label_problems(notebook("Measured on AMD EPYC (2 cores), 1 thread: 129 s"), POINTS) == []
    assert label_problems(notebook("3 seeds, 2 sets"), POINTS) == []              # not a duration


def test_a_timing_figure_needs_its_machine_in_its_caption():
    figure = new_output("display_data", data={"image/png": "AAAA"}, metadata={"figure": {
        "axes": [{"axis": "y", "scale": "linear", "label": "ms per AR step / per round"}], "legend": []}})
    bare = new_output("display_data", data={"text/markdown": "*Figure 06_round_phases.* milliseconds by phase"})
    named = new_output("display_data", data={"text/markdown": "*Figure 06_round_phases.* Measured on X, 1 thread"})
    nb = new_notebook(cells=[new_code_cell("x", outputs=[figure, bare])])
    assert len(label_problems(nb, POINTS)) == 1
    nb = new_notebook(cells=[new_code_cell("x", outputs=[figure, named])])
    assert label_problems(nb, POINTS) == []


def test_a_derived_or_inferred_value_is_never_called_the_papers():
    from helpers.report.paper import derived_paper_values
    derived = derived_paper_values()
    assert derived["+0.236"] is None and derived["2.47"] == "ceiling"
    bad = ["| device | overhead N=16 | source |\n|---|---|---|\n| iPhone 12 | +0.236 | paper |",
           "| N | paper ceiling |\n|---|---|\n| 32 | 2.47 |",
           "The paper's iPhone 12 overhead at N = 16 is +0.236."]
    for text in bad:
        assert len(label_problems(notebook(text), POINTS, derived)) == 1, text
    good = ["| device | overhead N=16 | source |\n|---|---|---|\n| iPhone 12 | +0.236 (derived) | paper |",
            "| N | paper ceiling |\n|---|---|\n| 32 | 2.47 (inferred) |",
            "| drafter | paper tokens/step |\n|---|---|\n| offsets | 2.47 |"]                 # Table 2 prints 2.47
    for text in good:
        assert label_problems(notebook(text), POINTS, derived) == [], text


def test_the_papers_formula_is_never_called_measured():
    """Figure 4's speedups are its formula, tokens/step / (1 + verify overhead): a notebook, report or README line
    that calls one measured, or sets one beside a measured speedup of ours without saying so, is refused."""
    from pathlib import Path

    from helpers.artifacts import load_json
    from helpers.report.legacy_metrics import legacy_keys_renamed
    from helpers.report.nb08_report import sections
    from helpers.report.readme_results import results_block
    from helpers.report.paper import kind_problems, paper_speedup

    bad = ["| 0.6B shape: projected speedup | 1.27x projected | 2.13x measured (M3 Pro, N = 32) |",
           "| whole frames (Measured on X) | 1.37x measured | 2.13x (M3 Pro; tokens/step / (1 + overhead)) |",
           "The paper at N = 32: iPhone 17 Pro Max 2.34x; our measured speedup 0.90x."]
    for text in bad:
        assert len(kind_problems(text)) == 1, text
        assert len(label_problems(notebook("Measured on X. " + text), POINTS)) == 1, text
    good = f"| whole frames (Measured on X) | 1.37x measured | {paper_speedup()} |"
    assert kind_problems(good) == [] and "2.13x by Figure 4's formula (MacBook M3 Pro, N = 32)" in good
    assert kind_problems("12.13x measured; 2.130 tokens") == []              # not the paper's numbers
    assert kind_problems("| this CPU, projected | 16 (1.82x) | measured overhead x paper tokens/step |") == []
    ours = ("Measured on X. The paper's MacBook M3 Pro: 0.86. Tokens/step of 1.67 buy at most 1.21x.")  # ours, not
    assert kind_problems(ours) == []                                       # the iPhone 12's 1.21x at N = 64
    assert len(kind_problems("Measured on X; the iPhone 12 at N = 64: 1.21x.")) == 1
    root = Path(__file__).resolve().parent.parent
    reference = root / "outputs" / "mini-reference"
    assert kind_problems(results_block(reference)) == []
    report = sections(reference, legacy_keys_renamed(load_json(reference / "metrics.json")))     # report.md's text
    assert kind_problems("\n".join(report)) == []
    assert kind_problems((root / "README.md").read_text()) == []
    for doc in sorted((root / "docs").glob("*.md")):
        assert kind_problems(doc.read_text()) == [], doc.name
