"""The trained miniature committed with the repository (`make mini`, outputs/mini-trained): a shipped step is taken
only where its key (every build parameter and the speech's content) is the one the code builds, and the committed
one is the miniature that params/mini.yaml builds."""

import shutil
from dataclasses import replace

import pytest
import torch

from helpers.artifacts import load_json, load_tensors
from helpers.backends.mini.build import SMOKE, build_mini
from helpers.backends.mini.shipped import SHIPPED_STEPS, ship
from helpers.experiment.run.params import REPO_ROOT, load_params


def steps_logged(logs: list[str]) -> dict[str, str]:
    """{step: "cached" | "shipped" | "built"} from a build's log lines ("codec: shipped (...)")."""
    out = {}
    for line in logs:
        name, _, rest = line.partition(": ")
        out[name] = rest.split()[0]
    return out


@pytest.fixture(scope="module")
def shipped(smoke_cache, tmp_path_factory):
    """The smoke miniature (built once for the session) shipped to a folder of its own."""
    mini = build_mini(SMOKE, smoke_cache / "mini", log=lambda line: None)
    return mini, ship(mini, tmp_path_factory.mktemp("trained") / "mini-trained", seconds=1.0)


def test_a_shipped_folder_holds_the_steps_and_says_where_they_came_from(shipped):
    mini, folder = shipped
    names = sorted(p.name.split("-")[0] for p in folder.iterdir() if p.is_dir())
    assert names == sorted(SHIPPED_STEPS)
    manifest = load_json(folder / "manifest.json")
    assert manifest["speech"] == mini.folders["speech"].name and manifest["numerics"]["openblas"]
    assert manifest["steps"]["model"]["folder"] == mini.folders["model"].name
    assert manifest["validation"] == mini.history["training"]["validation"]
    assert mini.folders["model"].name in (folder / "README.md").read_text()


def test_a_build_takes_the_shipped_steps_and_gets_the_same_miniature(shipped, tmp_path):
    mini, folder = shipped
    logs = []
    again = build_mini(SMOKE, tmp_path / "cache", log=logs.append, shipped=folder)
    again.recogniser(log=logs.append)
    assert steps_logged(logs) == {"codec": "shipped", "model": "shipped", "recogniser": "shipped"}  # speech: built
    for name in ("codec.safetensors", "codes.safetensors"):
        a, b = (load_tensors(m.folders["codec"] / name) for m in (mini, again))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for a, b in zip(mini.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)


def test_a_shipped_step_is_not_taken_for_other_parameters_or_other_speech(shipped, tmp_path):
    _, folder = shipped
    logs = []
    build_mini(replace(SMOKE, train=replace(SMOKE.train, epochs=1)), tmp_path / "a", log=logs.append, shipped=folder)
    assert steps_logged(logs) == {"codec": "shipped"}                 # the model trained again: its key differs
    speech = next((tmp_path / "a").glob("speech-*"))
    other = tmp_path / "b" / speech.name
    shutil.copytree(speech, other)
    with open(other / "manifest.json", "a") as f:                     # the same parameters, other bytes
        f.write("\n")
    logs.clear()
    build_mini(SMOKE, tmp_path / "b", log=logs.append, shipped=folder)
    assert steps_logged(logs) == {"speech": "cached"}                 # codec and model built for this speech


@pytest.mark.slow
def test_the_committed_miniature_is_the_one_params_mini_builds(tmp_path, capsys):
    """params/mini.yaml's miniature, built into an empty cache, takes every trained step from outputs/mini-trained
    (and trains nothing): the committed weights are the ones the code and its build parameters make."""
    from helpers.artifacts import set_note_sink
    from helpers.experiment.run.backend_factory import load_backend
    P = load_params(REPO_ROOT / "params" / "mini.yaml", {"cache_dir": str(tmp_path)})
    trained = REPO_ROOT / P.mini_trained
    assert trained.is_dir(), "no trained miniature committed: run `make mini`"
    set_note_sink(None)                                              # the build's lines to stdout
    b = load_backend(P)
    b.mini.recogniser()
    logged = steps_logged([l for l in capsys.readouterr().out.splitlines() if ": " in l])
    assert {k: logged.get(k) for k in SHIPPED_STEPS} == {k: "shipped" for k in SHIPPED_STEPS}
    assert load_json(trained / "manifest.json")["numerics"]["aten"].lower() == "avx2"     # trained in the pinned build step
