"""The executed-notebook check (helpers.experiment.run.notebook_check) and the banner filter: each finds what it
must."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from helpers.experiment.run.notebook_check import SCREEN_LINES, output_problems
from helpers.experiment.run.quiet import BANNERS, without


def notebook(*outputs, source="x = 1", tags=()):
    cell = new_code_cell(source, outputs=list(outputs))
    cell.metadata["tags"] = list(tags)
    return new_notebook(cells=[cell])


def stream(text, name="stdout"):
    return new_output("stream", name=name, text=text)


def test_a_clean_notebook_has_no_problem():
    shown = new_output("display_data", data={"text/markdown": "a table\n| a |\n|---|"})
    figure = new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"})
    caption = new_output("display_data", data={"text/markdown": "*Figure 00_x.* what to look at"})
    assert output_problems(notebook(stream("run 'smoke': outputs in outputs/smoke/\n"), shown, figure, caption),
                           ["/abs/repo"]) == []


def test_each_kind_of_problem_is_found():
    bar = "train offsets:  45%|████▌     | 13/29 [00:01<00:01, 9.1it/s]\r"
    cases = {"progress-bar": stream(bar), "banner": stream(f"{BANNERS[2]}\n"),
             "machine path": stream("cached (/abs/repo/outputs/x)\n"),
             "lines of stdout": stream("row\n" * (SCREEN_LINES + 1)),
             "an output of": new_output("execute_result", data={"text/plain": "{\n" * (SCREEN_LINES + 1)},
                                        execution_count=1),
             "without a caption": new_output("display_data", data={"image/png": "AAAA"})}
    for kind, output in cases.items():
        problems = output_problems(notebook(output), ["/abs/repo"])
        assert len(problems) == 1 and kind in problems[0], (kind, problems)


def test_every_stderr_block_is_a_problem_naming_its_cell_and_first_line():
    warning = stream("\n/x/y.py:3: UserWarning: something went wrong\n  warnings.warn(msg)\n", "stderr")
    nb = new_notebook(cells=[new_code_cell("x = 1", outputs=[stream("kept\n")]),
                             new_code_cell("y = 2", outputs=[stream("a\n"), warning, stream("second\n", "stderr")])])
    assert output_problems(nb) == ["cell 1: stderr output '/x/y.py:3: UserWarning: something went wrong'",
                                   "cell 1: stderr output 'second'"]
    assert output_problems(new_notebook(cells=[new_code_cell("x = 1", outputs=[stream("a\n"), stream("b\n")])])) == []


def test_parameters_cells_are_checked_against_their_own_paths():
    injected = notebook(source='params_file = "/abs/repo/params/smoke.yaml"\noutput_dir = "/tmp/run"',
                        tags=["injected-parameters"])
    assert output_problems(injected, ["/abs/repo", "/tmp/run"], parameter_paths=["/abs/repo"]) == [
        "cell 0: parameters show the machine path /abs/repo"]


def test_the_banner_filter_keeps_every_other_line():
    text = "\n********\nWarning: flash-attn is not installed. Will only run ...\n********\n \nreal output\n"
    assert without(text, ("flash-attn", "********")) == "real output\n"


def run_python(code, **env):
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_under_the_runner_bars_and_notes_go_to_its_log_not_the_streams(tmp_path):
    log = tmp_path / "nb.log"
    code = ("import helpers\nfrom tqdm.auto import tqdm\nfrom helpers.artifacts import note\n"
            "for _ in tqdm(range(3), desc='train offsets'): pass\nnote('speech: cached (x)')\nprint('kept')")
    result = run_python(code, RVQ_PROGRESS_LOG=str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kept\n" and "train offsets" not in result.stderr
    assert "train offsets" in log.read_text() and "speech: cached (x)" in log.read_text()


def test_the_known_banners_are_silenced_and_nothing_else():
    code = ("from helpers.experiment.run.quiet import silence_banners\nsilence_banners()\nimport sox\n"
            "import qwen_tts.core.tokenizer_25hz.vq.whisper_encoder\nimport coremltools\n"
            "import warnings\nwarnings.warn('other warning')")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert not [b for b in BANNERS if b in result.stdout + result.stderr], result.stdout + result.stderr
    assert "other warning" in result.stderr


def test_known_records_are_dropped_inside_the_block_only(caplog):
    import logging
    from helpers.measure.coreml_export import dropped_records
    log = logging.getLogger("rvq.test.quiet")
    with caplog.at_level(logging.WARNING, logger="rvq.test.quiet"):
        with dropped_records({"rvq.test.quiet": ("Tuple detected",)}):
            log.warning("Tuple detected at graph output")
            log.warning("a real problem")
        log.warning("Tuple detected again, after the block")
    assert [r.getMessage() for r in caplog.records] == ["a real problem", "Tuple detected again, after the block"]
    assert not log.filters


def test_a_core_ml_export_writes_nothing_to_stderr_but_what_is_new(tmp_path):
    """Notebook 07's cell, on a tiny model, as the runner runs it (setup's silence_banners, bars to the log): the
    import banners of coremltools, transformers' loss_type note while tracing and the converter's notes on tuples and
    int64 constants are gone; the same converter note outside the export still shows."""
    import pytest
    pytest.importorskip("coremltools")
    code = ("import helpers\nfrom helpers.experiment.run.quiet import silence_banners\nsilence_banners()\n"
            "import torch\n"
            "from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker\n"
            "from helpers.measure.coreml_export import export_calls\nfrom helpers.method.drafters import PositionOffsets\n"
            "from helpers.method.predictor import CodePredictor\nfrom helpers.method.tree import SparseTree\n"
            "spec = TinyTalkerSpec(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,"
            " talker_hidden_size=24)\n"
            "cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=0, dtype=torch.float32))\n"
            f"export_calls(cp, PositionOffsets(cp), SparseTree.chain(2), {str(tmp_path / 'coreml')!r}, w8a16=False)\n"
            "import logging\nlogging.getLogger('coremltools').warning('Tuple detected at graph output, outside')")
    result = run_python(code, RVQ_PROGRESS_LOG=str(tmp_path / "nb.log"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "Tuple detected at graph output, outside\n", result.stderr


def test_the_log_tail_feeds_what_is_appended(tmp_path):
    from helpers.experiment.run.progress import LogTail
    log, seen = tmp_path / "nb.log", []

    class Sink:
        def write(self, text):
            seen.append(text)

    log.write_text("before\n")
    with LogTail(log, Sink(), interval=0.01):
        with open(log, "a") as f:
            f.write("train offsets: 50%|\r")
    assert "".join(seen) == "train offsets: 50%|\r"


def test_the_miniature_origin_says_each_build_step_and_refuses_nothing():
    import pytest
    from helpers.report.nb00_overview import miniature_origin
    text = miniature_origin({"speech": 19.4, "codec": 1.8, "model": None}, "smoke", 0, "outputs/cache/mini/")
    assert "speech 19 s, codec 2 s (0.4 min in all); model not timed" in text and "`outputs/cache/mini/`" in text
    assert "ship with the repository" not in text
    shipped = miniature_origin({"speech": 31.0, "codec": 25.0, "model": 480.0}, "mini", 0, "c/", ["codec", "model"])
    assert "The codec and model steps were trained by `make mini` and ship with the repository" in shipped
    with pytest.raises(ValueError, match="seconds per build step"):
        miniature_origin({}, "smoke", 0, "x")


def test_a_cell_tagged_long_output_may_be_long():
    long = stream("row\n" * (SCREEN_LINES + 1))
    assert output_problems(notebook(long, tags=["long-output"])) == []
    assert output_problems(notebook(long))


def test_the_committed_reference_notebooks_read_clean():
    """outputs/mini-reference/ is what a visitor reads first: no bars, banners, stderr, long dumps, uncaptioned
    figures, or absolute paths anywhere in the files (outputs, parameters, papermill metadata); every latency names
    its machine and no paper value is interpolated unlabelled."""
    import re
    from pathlib import Path
    from helpers.experiment.run.labelled_numbers import label_problems
    from helpers.report.paper import derived_paper_values, paper_points
    root = Path(__file__).resolve().parent.parent / "outputs" / "mini-reference"
    notebooks = sorted(root.glob("*.ipynb"))
    assert [p.stem[:2] for p in notebooks] == [f"{i:02d}" for i in range(9)]
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        assert output_problems(nb, [Path("/work"), Path("/root"), Path("/home")]) == [], path.name
        assert label_problems(nb, set(paper_points()), derived_paper_values()) == [], path.name
        assert not re.search(r'"(/work|/root|/home|/tmp)/', path.read_text()), path.name


def _figure(record):
    return new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"},
                      metadata={"figure": record})


def test_a_log_axis_must_say_so_in_its_label():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from helpers.report.plots import figure_record
    caption = new_output("display_data", data={"text/markdown": "*Figure 06_x.* what to look at"})
    fig, ax = plt.subplots()
    ax.plot([1, 10], [1, 100])
    ax.set(yscale="log", xlabel="q", ylabel="call cost / AR call")            # the defect: log, unsaid
    problems = output_problems(notebook(_figure(figure_record(fig)), caption))
    assert len(problems) == 1 and "log y axis whose label does not say so" in problems[0]
    ax.set_ylabel("call cost / AR call (log scale)")                          # fixed
    assert output_problems(notebook(_figure(figure_record(fig)), caption)) == []
    plt.close(fig)


def test_a_legend_may_not_call_derived_points_the_papers():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from helpers.report.plots import figure_record, mark
    caption = new_output("display_data", data={"text/markdown": "*Figure 06_x.* what to look at"})
    fig, ax = plt.subplots()
    mark(ax.scatter([17], [1.236], label="paper: iPhone 12"), "derived")     # the defect: 2.25 / 1.82 - 1 as "paper"
    ax.scatter([33], [1.136], label="paper: MacBook M3 Pro")                 # printed by the paper: fine
    ax.legend()
    problems = output_problems(notebook(_figure(figure_record(fig)), caption))
    assert len(problems) == 1 and "derived points the paper's" in problems[0] and "iPhone 12" in problems[0]
    ax.collections[0].set_label("derived from the paper: iPhone 12")          # fixed
    ax.legend()
    assert output_problems(notebook(_figure(figure_record(fig)), caption)) == []
    plt.close(fig)
