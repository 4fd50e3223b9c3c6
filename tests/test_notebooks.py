"""The notebook sequence: its structure, a papermill run of all of it on params/smoke.yaml (complete metrics,
lossless), one notebook run alone with the papermill CLI, and a failing notebook named with its output."""

import json
import os
import subprocess
import sys

import nbformat
import papermill
import pytest

from helpers.experiment.run.metrics import missing_keys, required_keys
from helpers.experiment.run.params import REPO_ROOT, RunParams, load_params
from helpers.experiment.run.runner import notebooks

FIELDS = set(RunParams().to_dict())


def test_every_notebook_has_one_parameters_cell_defaulting_to_mini():
    found = notebooks()
    assert {"00", "01", "02", "03", "04", "05", "08"} <= {p.name[:2] for p in found}
    for path in found:
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, path.name
        declared = papermill.inspect_notebook(str(path))
        assert declared["params_file"]["default"] == '"params/mini.yaml"', path.name
        assert set(declared) - {"params_file"} <= FIELDS, path.name
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{path.name} has outputs"


def run(*args, timeout=3600, env=None):          # a hang guard: the smoke sequence takes 20 min on a slow, loaded CPU
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, smoke_cache):
    out = tmp_path_factory.mktemp("outputs")
    result = run("-m", "helpers", "params/smoke.yaml", "-p", f"output_dir={out}", "-p", f"cache_dir={smoke_cache}",
                 "-p", "workers=2", env={"RVQ_PROGRESS_SECONDS": "0"})   # every new output line shown as progress
    return out, result


def test_one_process_builds_the_artifacts_two_workers_built(smoke_run, smoke_cache, tmp_path):
    """Calibration, syntheses, replays and the quality stage rebuilt in this process (workers 1) from the smoke
    run's data and drafters: every tensor file and JSON the same, byte for byte (timings aside)."""
    import shutil

    from helpers.experiment.stages import stages
    from helpers.experiment.stages.quality import quality
    out, result = smoke_run
    assert result.returncode == 0, result.stdout + result.stderr
    P = load_params(REPO_ROOT / "params" / "smoke.yaml", {"output_dir": str(tmp_path), "cache_dir": str(smoke_cache),
                                                           "workers": 1})
    parallel = out / "smoke" / "artifacts"
    for folder in parallel.iterdir():
        if folder.name.split("-")[0] in ("data", "samples", "drafters"):
            shutil.copytree(folder, P.run_dir / "artifacts" / folder.name)
    stages.calibration(P), stages.evaluation(P), quality(P)
    rebuilt = [f for f in (P.run_dir / "artifacts").iterdir() if f.name.split("-")[0] in
               ("calibration", "syntheses", "evaluation", "wer")]
    assert len(rebuilt) == 4
    for folder in rebuilt:
        for file in folder.iterdir():
            if file.name == "build.json":
                continue
            if file.name == "wer.json":
                a, b = (json.loads(f.read_text()) for f in (file, parallel / folder.name / file.name))
                assert a.pop("seconds")["workers"] == 1 and b.pop("seconds")["workers"] == 2
                assert a == b
            else:
                assert file.read_bytes() == (parallel / folder.name / file.name).read_bytes(), file


def test_the_whole_sequence_runs_on_smoke_with_complete_metrics(smoke_run):
    out, result = smoke_run
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = out / "smoke"
    P = load_params(REPO_ROOT / "params" / "smoke.yaml")
    names = [p.stem for p in notebooks()]
    assert [line.split()[1] for line in result.stdout.splitlines() if line.startswith("[")] == names
    progress = [line for line in result.stdout.splitlines() if line.startswith("  [")]
    bar = "02_train_drafters ... train drafters"                 # the pool's tqdm bar reached the runner's progress line
    assert any(bar in line and "%|" in line for line in progress), progress[-20:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert missing_keys(metrics, required_keys(P)) == []
    lossless = metrics["lossless"]
    assert lossless["frames_compared"] > 100 and lossless["frames_identical"] == lossless["frames_compared"]
    assert set(metrics["run"]["wall_s"]) == set(names)
    assert metrics["languages"]["en"]["wer_ar"] is not None and metrics["languages"]["de"]["wer_ar"] is None
    assert all(metrics["languages"][lang]["per_ar"] is not None for lang in P.languages)     # PER in every language
    by_level = metrics["codec_levels_per"]                # notebook 01's round trip with all 16 levels is notebook 05's
    assert by_level["levels"][-1] == 16 and set(by_level["per"]) == set(P.languages)
    assert all(by_level["per"][lang][-1] == metrics["languages"][lang]["per_codec"] for lang in P.languages)
    en = metrics["languages"]["en"]                 # PER over every seed, the extra WER column from the first
    assert len(en["per_ar_per_seed"]) == len(en["per_spec_per_seed"]) == P.wer_seeds > 1
    assert len(en["wer_ar_per_seed"]) == len(en["wer_spec_per_seed"]) == 1 and en["wer_ar_std"] is None
    assert not metrics["parity"]["rejected"] and metrics["parity"]["control"]["rejected"]
    for n in P.tree_sizes:
        assert 1.0 < metrics["tree"][str(n)]["measured_tokens_per_step"] <= 15.0
    assert metrics["drafters"]["offsets"]["added_params"] == P.depth * 64          # K x H of the smoke model
    for name in names:
        assert (run_dir / f"{name}.ipynb").exists()
    assert {"03_tree.png", "03_tree_attention_mask.png", "04_tokens_vs_n.png", "06_round_phases.png"} <= {
        p.name for p in (run_dir / "figures").glob("*.png")}
    assert (run_dir / "tables" / "table2_drafters.csv").exists()
    report = (run_dir / "report.md").read_text()
    for heading in ("Table 1", "Table 2", "Table 3", "Losslessness", "Where the time goes", "Figures"):
        assert heading in report


def test_one_notebook_runs_alone_with_the_papermill_cli(smoke_run, smoke_cache, tmp_path):
    out, _ = smoke_run
    nb = REPO_ROOT / "notebooks" / "01_data_and_teacher_forcing.ipynb"
    result = run("-m", "papermill", str(nb), str(tmp_path / "out.ipynb"), "-p", "params_file", "params/smoke.yaml",
                 "-p", "run_name", "alone", "-p", "output_dir", str(out), "-p", "cache_dir", str(smoke_cache),
                 "--cwd", str(REPO_ROOT / "notebooks"))
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "alone" / "metrics.json").read_text())
    assert metrics["data"]["teacher_forced"]["train"]["frames"] > 0


def test_a_failing_notebook_is_named_with_its_partial_output(smoke_run, tmp_path):
    """A missing model: the pre-flight stops the run before any notebook; past it (--no-check), the notebook that
    fails is named and its partial output kept."""
    out, _ = smoke_run
    broken = ("-m", "helpers", "params/smoke.yaml", "--only", "01", "-p", "run_name=broken", "-p", f"output_dir={out}",
              "-p", "backend=qwen3", "-p", f"model_id_or_path={tmp_path / 'missing'}")
    refused = run(*broken)
    assert refused.returncode == 1 and "the pre-flight failed" in refused.stderr
    assert "FAILED" in refused.stdout + refused.stderr and not (out / "broken").exists()
    result = run(*broken, "--no-check")
    assert result.returncode == 1
    assert "notebook 01_data_and_teacher_forcing.ipynb failed in cell" in result.stderr
    assert (out / "broken" / "01_data_and_teacher_forcing.ipynb").exists()


def test_the_executed_notebooks_hold_no_bars_banners_machine_paths_or_dumps(smoke_run):
    """Progress bars and build notes go to the runner's log, the known banners are silenced, no output shows the
    project's, the environment's or the run's absolute path, none is longer than a screen, every figure is captioned;
    every latency names its machine and no paper value is interpolated unlabelled (`labelled_numbers`)."""
    from helpers.experiment.run.labelled_numbers import label_problems
    from helpers.experiment.run.notebook_check import output_problems
    from helpers.report.paper import derived_paper_values, paper_points
    out, result = smoke_run
    assert result.returncode == 0, result.stdout + result.stderr
    machine = [REPO_ROOT, sys.prefix, out]
    problems = []
    for path in sorted((out / "smoke").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        found = output_problems(nb, machine, parameter_paths=[REPO_ROOT, sys.prefix])
        found += label_problems(nb, set(paper_points()), derived_paper_values())
        found += [f"metadata papermill.{k} is a machine path: {v}" for k, v in nb.metadata["papermill"].items()
                  if k.endswith("_path") and any(str(m) in str(v) for m in machine)]
        problems += [f"{path.name} {p}" for p in found]
    assert problems == [], "\n".join(problems)


def test_the_offset_ablation_script_reads_the_runs_own_numbers(smoke_run, smoke_cache):
    """scripts/offset_ablation.py on the smoke run's cached stages: the drafters' numbers and the main drafter the
    notebooks put in metrics.json, recomputed from the same artifacts."""
    out, _ = smoke_run
    result = run("scripts/offset_ablation.py", "--params", "params/smoke.yaml", "-p", f"output_dir={out}",
                 "-p", f"cache_dir={smoke_cache}")
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads((out / "smoke" / "metrics.json").read_text())
    ablation = json.loads((out / "smoke" / "offset_ablation.json").read_text())
    assert ablation["main_drafter"] == metrics["main_drafter"]
    assert set(ablation["drafters"]) == set(load_params(REPO_ROOT / "params" / "smoke.yaml").drafters)
    for name, row in ablation["drafters"].items():
        assert row["added_params"] == metrics["drafters"][name]["added_params"]
        assert row["expected_tokens_per_step"] == pytest.approx(metrics["drafters"][name]["expected_tokens_per_step"],
                                                                abs=1e-12)
        assert row["validation_top1"] == pytest.approx(metrics["drafters"][name]["validation_top1"], abs=1e-12)


# Notebook 06's timings, fewer (none of them is a stage's parameter: every stage still comes from the smoke run's).
SHORT_TIMINGS = {"latency_calls": 5, "latency_warmup": 1, "latency_frames": 20, "full_size_frames": 1}
IMPOSSIBLE_03 = {"max_depth": 1, "size": 64}     # notebook 03's controls: one depth of 17 ranks (smoke) holds 17 nodes


def test_every_notebook_runs_in_a_plain_kernel_as_jupyterlab_runs_it(smoke_run, smoke_cache, monkeypatch):
    """Notebooks 00-08 in order, each executed top to bottom by nbclient in a plain python3 kernel without the
    runner's variable (so the try-it cells build live ipywidgets and 08 reads what 00-07 wrote, as in JupyterLab),
    in their own run folder on a copy of the smoke run's artifacts; then every control moved (`plain_kernel`): no
    cell, no render and no cell that moved a control holds an error, a stderr stream or a printed traceback or
    warning, every render displays something, the outputs pass the executed notebooks' check (no bars, banners or
    machine paths), and notebook 03's controls set to a tree that does not fit show one line saying why."""
    import shutil
    import time

    from plain_kernel import problems_in, run_plain

    from helpers.experiment.run.controls import NOT_SHOWN
    from helpers.experiment.run.notebook_check import output_problems
    from helpers.experiment.run.quiet import PROGRESS_ENV
    out, result = smoke_run
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.copytree(out / "smoke" / "artifacts", out / "plain" / "artifacts")      # its own run folder
    smoke_metrics = (out / "smoke" / "metrics.json").read_bytes()
    monkeypatch.delenv(PROGRESS_ENV, raising=False)                  # the kernel inherits this process's environment
    parameters = {"params_file": "params/smoke.yaml", "run_name": "plain", "output_dir": str(out),
                  "cache_dir": str(smoke_cache), **SHORT_TIMINGS}
    problems, moved, seconds, said = [], {}, {}, []
    for path in notebooks():
        start = time.time()
        nb, renders = run_plain(path, parameters, REPO_ROOT, combos=[IMPOSSIBLE_03])    # kernel in the root: the
        seconds[path.name[:2]] = round(time.time() - start, 1)                        # checkout's helpers
        problems += [f"{path.name} {p}" for p in output_problems(nb, [REPO_ROOT, sys.prefix, out, smoke_cache],
                                                                  parameter_paths=[REPO_ROOT, sys.prefix])]
        problems += [f"{path.name} cell {i}: {p}" for i, cell in enumerate(nb.cells)
                     for p in problems_in(cell.get("outputs", []))]
        for r in renders:
            where = f"{path.name} {r['control'] or 'first render'} = {r['value']!r}:"
            problems += [f"{where} {p}" for p in problems_in(r["cell"] + r["shown"])]
            if not [o for o in r["shown"] if o.get("output_type") in ("display_data", "execute_result")]:
                problems.append(f"{where} nothing shown")
        moved[path.name[:2]] = {r["control"] for r in renders if r["control"]}
        said += [o["data"]["text/markdown"] for r in renders if r["value"] == IMPOSSIBLE_03 for o in r["shown"]
                 if "text/markdown" in o.get("data", {})]
    print(f"plain kernel, seconds per notebook: {seconds}")
    assert problems == [], "\n".join(problems)
    assert moved["00"] == {"tree", "depth", "temperature", "seed"}
    assert moved["03"] == {"drafter", "size", "max_depth", "max_depth, size"}
    assert len(said) == 1 and said[0].startswith(NOT_SHOWN) and "lower N or raise max_depth" in said[0], said
    assert "\n" not in said[0], said
    assert not any(moved[k] for k in moved if k not in ("00", "03")), moved
    assert (out / "plain" / "report.md").exists()          # 08 found the run complete without the runner's wall times
    assert json.loads((out / "plain" / "metrics.json").read_text())["run"]["runner"] is False
    assert (out / "smoke" / "metrics.json").read_bytes() == smoke_metrics      # the shared run folder untouched


def test_make_bench_runs_on_the_smoke_runs_stages(smoke_run, smoke_cache):
    """`make bench` (helpers.experiment.bench.bench) on the smoke run's cached stages, small: the sweep, every
    deployment, the full-size frames (one frame), the side by side; its file holds what it printed, every full-size frame
    lossless, and the full-size table has every deployment this CPU runs."""
    out, result = smoke_run
    assert result.returncode == 0, result.stdout + result.stderr
    saved = out / "bench.json"
    bench = run("-m", "helpers.experiment.bench.bench", "--params", "params/smoke.yaml", "-p", f"output_dir={out}",
                "-p", f"cache_dir={smoke_cache}", "--calls", "3", "--warmup", "1", "--frames", "3", "--side-frames", "2",
                "--compile", "none", "--compiled-sizes", "2", "--real-rounds", "0", "--full-size-frames", "1",
                "--engine-threads", "1", "--out", str(saved))
    assert bench.returncode == 0, bench.stdout + bench.stderr
    data = json.loads(saved.read_text())
    full = data["full_size"]
    assert full["frames"] == 1 and full["shape"]["hidden_size"] == 1024
    assert all(s["lossless"] for s in full["systems"].values()), full["systems"]
    ident = full["identity"]                               # every speculative loop counted apart, on more frames
    assert set(ident["identical"]) == {k for k in full["systems"] if not k.startswith("ar@")}
    assert ident["frames"] > full["frames"] and all(v == ident["frames"] for v in ident["identical"].values())
    assert f"fastest AR {full['fastest_ar']}" in bench.stdout and "side by side" in bench.stdout
    assert data["deployments"]["frames"]["frames"] == 2 and data["side_by_side"]["frames"] == 2
