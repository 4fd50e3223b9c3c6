"""The README stays a page a newcomer reads in minutes, and the docs pages it points to stay reachable.

- README.md has at most 200 lines;
- it holds no machine path outside the project, no ISO date and no issue-tracker reference (a measurement history
  belongs in git), and neither do the docs pages, except probe records (`docs/*-probe.md`);
- its results block is the one `helpers.report.readme_results` generates from the committed reference run;
- every relative link in README.md and docs/*.md points to a file inside the project that exists;
- the README links every docs page, and every docs page it links exists.
"""

import re
from pathlib import Path

import pytest

from helpers.report.readme_results import BEGIN, END, results_block

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE_RUN = ROOT / "outputs" / "mini-reference"

MAX_LINES = 200
MACHINE_PATHS = ("/work/", "/root/", "/home/", "/tmp/")
ISO_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
TRACKER = re.compile(r"\b(issues?|PRs?|pull requests?)\s*#?\s*\d+|(^|[\s(])#\d+\b", re.IGNORECASE)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def docs_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans: where Markdown links live."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def relative_links(text: str) -> list[str]:
    """Link targets that are files of the project: no URL, no mail address, no in-page anchor; anchors cut off."""
    out = []
    for target in LINK.findall(prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def history_problems(text: str) -> list[str]:
    """Machine paths outside the project, ISO dates and tracker references, each with its line number."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        problems += [f"line {number}: machine path {p!r}" for p in MACHINE_PATHS if p in line]
        problems += [f"line {number}: date {m.group(0)!r}" for m in ISO_DATE.finditer(line)]
        problems += [f"line {number}: tracker reference {m.group(0).strip()!r}" for m in TRACKER.finditer(line)]
    return problems


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page.read_text()):
        path = (page.parent / target).resolve()
        if not path.is_relative_to(ROOT):
            broken.append(f"{target} (outside the project)")
        elif not path.exists():
            broken.append(f"{target} (no such file)")
    return broken


def readme_block(text: str) -> str:
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README.md must hold one {BEGIN} ... {END} block"
    return BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END


def test_the_readme_fits_on_a_few_screens():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines, at most {MAX_LINES}: move the detail to docs/"


def test_the_readme_holds_no_dates_machine_paths_or_tracker_references():
    assert history_problems(README.read_text()) == []


@pytest.mark.parametrize("page", [p.name for p in docs_pages() if not p.name.endswith("-probe.md")])
def test_the_docs_hold_no_dates_machine_paths_or_tracker_references(page):
    assert history_problems((DOCS / page).read_text()) == []


def test_the_results_block_is_generated_from_the_reference_run():
    expected = results_block(REFERENCE_RUN)
    assert readme_block(README.read_text()) == expected, (
        "README.md's results block differs from the reference run's: "
        ".venv/bin/python -m helpers.report.readme_results outputs/mini-reference --write README.md")


@pytest.mark.parametrize("page", ["README.md"] + [f"docs/{p.name}" for p in docs_pages()])
def test_every_relative_link_points_to_a_file_that_exists(page):
    assert broken_links(ROOT / page) == []


def test_the_readme_links_every_docs_page_and_each_one_exists():
    linked = {(ROOT / t).resolve() for t in relative_links(README.read_text()) if t.startswith("docs/")}
    assert linked, "README.md links no docs page"
    missing = sorted(str(p.relative_to(ROOT)) for p in linked if not p.is_file())
    assert missing == [], f"README.md links docs pages that do not exist: {missing}"
    unlinked = sorted(p.name for p in docs_pages() if p.resolve() not in linked)
    assert unlinked == [], f"docs pages the README does not link: {unlinked}"


def test_the_checks_can_fail():
    """Each check rejects what it must: so a passing run means something."""
    assert history_problems("see /work/scratch/x.py") and history_problems("run of 2026-12-01")
    assert history_problems("as issue 14 asked") and history_problems("fixed in (#12)")
    assert not history_problems("N = 32, 2,394 frames, 80 ms, c15, top-k 50, Sec. 3")
    assert relative_links("[a](docs/x.md#part) [b](https://x.org) [c](#top) `[d](e.md)`") == ["docs/x.md"]
    with pytest.raises(AssertionError):
        readme_block("no block here")
