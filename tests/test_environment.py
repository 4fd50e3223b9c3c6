"""The pins live in pyproject.toml only: environment.yml installs the project itself, and the pinned stack is what
runs."""

from importlib.metadata import version
from pathlib import Path
import tomllib

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_installs_the_project_and_pins_nothing():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == ["-e ."]
    assert "python=3.11" in env["dependencies"] and "pip" in env["dependencies"]


def test_pinned_versions_are_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    pinned = {r.name for r in requirements if r.specifier}
    assert pinned >= {"torch", "torchaudio", "qwen-tts", "transformers", "numpy", "coremltools"}
    wrong = [f"{r} (installed {version(r.name)})" for r in requirements
             if not r.specifier.contains(version(r.name), prereleases=True)]
    assert not wrong, wrong
