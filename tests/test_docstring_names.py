"""Words that match the code: every `helpers.<module>[.<name>]` a docstring or comment of the package cites exists."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"`(helpers(?:\.\w+)+)`")


def resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a class's too), by its dotted name."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_cited_helpers_name_exists():
    missing = []
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        for dotted in set(CITED.findall(path.read_text())):
            if not resolves(dotted):
                missing.append(f"{path.relative_to(ROOT)}: {dotted}")
    assert missing == [], "docstrings cite names that do not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_stale_name():
    assert resolves("helpers.method.clock.PhaseClock") and resolves("helpers.method.round")
    assert not resolves("helpers.method.fused.plans") and not resolves("helpers.method.compiled")
    assert not resolves("helpers.method.round.NoSuchModule")
