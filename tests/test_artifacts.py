"""Atomic artifacts and the parameter-keyed cache: nothing half-written ever looks complete."""

import pytest
import torch

from helpers.artifacts import (atomic_folder, build_seconds, cached_step, load_json, load_tensors, params_key, save_json,
                               save_tensors)


def test_atomic_writes_leave_only_the_file(tmp_path):
    save_json(tmp_path / "a.json", {"x": 1})
    save_tensors(tmp_path / "t.safetensors", {"w": torch.arange(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "t.safetensors"]
    assert load_json(tmp_path / "a.json") == {"x": 1}
    assert torch.equal(load_tensors(tmp_path / "t.safetensors")["w"], torch.arange(3))


def test_cached_step_builds_once_and_a_failed_build_leaves_nothing(tmp_path):
    calls = []

    def build(folder):
        calls.append(folder)
        (folder / "out.txt").write_text("done")

    first = cached_step(tmp_path, "step", {"a": 1}, build, log=lambda s: None)
    second = cached_step(tmp_path, "step", {"a": 1}, build, log=lambda s: None)
    assert first == second and len(calls) == 1 and (first / "out.txt").read_text() == "done"
    assert build_seconds(first) >= 0 and build_seconds(tmp_path) is None           # timed when built
    assert first.name == f"step-{params_key({'a': 1})}" and params_key({"a": 2}) != params_key({"a": 1})

    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        cached_step(tmp_path, "step", {"a": 2}, broken, log=lambda s: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]


def test_atomic_folder_replaces_a_leftover_and_keeps_the_extension(tmp_path):
    target = tmp_path / "model.mlpackage"
    (target / "old").mkdir(parents=True)

    def write(folder):
        assert folder.suffix == ".mlpackage" and folder.parent == tmp_path and not any(folder.iterdir())
        (folder / "new.txt").write_text("new")

    assert atomic_folder(target, write) == target
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"] and sorted(p.name for p in tmp_path.iterdir()) == [target.name]
