"""environment.yml and pyproject.toml name the same packages and pins; the pinned stack is what runs."""

from pathlib import Path
import tomllib

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(p for p in pip if not p.startswith("-e")) == sorted(project)
    assert "python=3.11" in env["dependencies"]


def test_pinned_versions_are_installed():
    from importlib.metadata import version
    assert version("torch") == "2.14.1"
    assert version("torchaudio") == "2.11.0"
    assert version("qwen-tts") == "0.1.1"
    assert version("transformers") == "4.57.3"
    assert version("coremltools") == "9.0"
    major, minor = map(int, version("numpy").split(".")[:2])
    assert (major, minor) < (2, 4)
