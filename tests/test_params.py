"""Run parameters: the schema, the params files, and the runner's early, clear refusal of bad input."""

import subprocess
import sys

import pytest
import yaml

from helpers.experiment.run.params import (REPO_ROOT, ParamsError, RunParams, load_params, notebook_params,
                                           parse_override)


@pytest.mark.parametrize("values, message", [
    ({"seeed": 1}, r"unknown parameter\(s\) seeed; allowed: run_name, "),
    ({"seed": "one"}, r"seed='one' has type str; expected int"),
    ({"top_k": True}, r"top_k=True has type bool; expected int"),
    ({"backend": "onnx"}, r"backend='onnx' is not allowed; allowed: mini, qwen3"),
    ({"languages": ["en", "fr"]}, r"languages=\['en', 'fr'\]: give a non-empty list without repeats from en, de"),
    ({"drafters": []}, r"drafters=\[\]: give a non-empty list"),
    ({"tree_size": 12}, r"tree_size=12 must be one of tree_sizes=\[4, 8, 15, 16, 31, 32, 47, 63, 64\]"),
    ({"depth": 15}, r"depth=15 must be in 1..14"),
    ({"wer_seeds": 0}, r"wer_seeds must be an integer >= 1, got 0"),
    ({"run_name": "../x"}, r"run_name='../x': use letters"),
    ({"shard_index": 2, "num_shards": 2}, r"shard_index=2 must be in 0..num_shards-1"),
    ({"temperature": 0.0}, r"temperature > 0"),
    ({"inner_loop_dtype": "float16"}, r"inner_loop_dtype='float16' is not allowed; allowed: same, float64, float32, bfloat16"),
])
def test_bad_values_name_the_key_and_what_is_allowed(values, message):
    with pytest.raises(ParamsError, match=message):
        RunParams.from_dict(values)


def test_params_files_are_valid_and_mini_is_the_default():
    files = sorted((REPO_ROOT / "params").glob("*.yaml"))
    assert {"smoke.yaml", "mini.yaml"} <= {f.name for f in files}
    for f in files:
        load_params(f)
    mini = yaml.safe_load((REPO_ROOT / "params" / "mini.yaml").read_text())
    defaults = RunParams().to_dict()
    assert {k: defaults[k] for k in mini} == mini          # the notebooks' defaults are the mini run


def test_overrides_and_notebook_namespace(tmp_path, monkeypatch):
    assert parse_override("tree_sizes=[4, 8]") == ("tree_sizes", [4, 8])
    assert parse_override("model_id_or_path=some/model") == ("model_id_or_path", "some/model")
    with pytest.raises(ParamsError, match="key=value"):
        parse_override("seed")
    monkeypatch.chdir(tmp_path)
    P = notebook_params({"params_file": "params/smoke.yaml", "seed": 3, "tree_size": None, "unrelated": 1})
    assert (P.run_name, P.seed, P.tree_size) == ("smoke", 3, 16)         # None keeps the file's value
    with pytest.raises(ParamsError, match="does not exist; available in params/: .*mini.yaml"):
        load_params("params/nope.yaml")


def run_cli(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "helpers", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, message", [
    (["params/nope.yaml"], "params file 'params/nope.yaml' does not exist"),
    (["params/smoke.yaml", "-p", "tree_szie=4"], "unknown parameter(s) tree_szie"),
    (["params/smoke.yaml", "-p", "seed=abc"], "seed='abc' has type str; expected int"),
    (["params/smoke.yaml", "--only", "42"], "--only 42: no such notebook; available: 00, 01"),
    (["params/qwen3-tts-0.6b.yaml", "--ship"], "--build and --ship build the miniature: they need backend mini"),
])
def test_runner_refuses_bad_input_before_any_notebook(tmp_path, args, message):
    out = tmp_path / "outputs"
    result = run_cli(*args, "-p", f"output_dir={out}")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr.replace(str(REPO_ROOT) + "/", "")
    assert not out.exists()                                              # nothing ran, nothing written
