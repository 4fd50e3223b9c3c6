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
    assert resolves("helpers.measure.phases.PhaseClock") and resolves("helpers.method.round")
    assert not resolves("helpers.method.fused.plans") and not resolves("helpers.method.compiled")
    assert not resolves("helpers.method.round.NoSuchModule")


PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
REPO_PATH = re.compile(r"(?<![\w/.-])((?:scripts|tests|helpers|docs|notebooks|params)/[\w./*-]*)")


def repo_paths(text: str) -> set[str]:
    """The repository paths a text names (a trailing full stop or slash dropped; globs left out)."""
    return {p.rstrip("./-") for p in REPO_PATH.findall(text) if "*" not in p}
REMOVED_AT = "1ef79fb"          # the last commit that held the probes removed in issue 42 (their findings are in docs/)
REMOVED = {f"scripts/probes/{name}.py" for name in ("audio_isa", "codec_levels_per", "dtype_sweep",
                                                     "level_predictability", "linear_stack", "predictor_proportions",
                                                     "self_distillation", "temperature_sweep", "tokenizer_probe")}


def test_every_name_and_file_a_page_cites_exists():
    """docs/*.md and the README: each `helpers.<name>` resolves and each repository path exists, save the removed
    probes, which a page cites only beside the commit that still holds them."""
    missing = []
    for page in PAGES:
        text = page.read_text()
        missing += [f"{page.name}: {d}" for d in set(CITED.findall(text)) if not resolves(d)]
        for path in repo_paths(text):
            if path in REMOVED:
                if f"git show {REMOVED_AT}:{path}" not in text:
                    missing.append(f"{page.name}: {path} (removed; cite it as git show {REMOVED_AT}:{path})")
            elif not (ROOT / path).exists():
                missing.append(f"{page.name}: {path}")
    assert missing == [], "pages cite names or files that do not exist:\n" + "\n".join(missing)


def test_the_removed_probes_are_gone():
    assert not any((ROOT / path).exists() for path in REMOVED)
    assert repo_paths("see scripts/gpu_check.py, `helpers/method/`, tests/test_qwen3_*, docs/gpu.md.") == {
        "scripts/gpu_check.py", "helpers/method", "docs/gpu.md"}
