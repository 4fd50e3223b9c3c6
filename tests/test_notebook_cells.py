"""Notebooks narrate: every code cell of notebooks/ is short, defines no function and builds no table in a loop (the
logic lives in helpers, where it is tested). A source check, cell by cell; the checker itself is tested on small
cells first."""

import ast
import json
import warnings

import nbformat
import pytest

from helpers.experiment.run.runner import notebooks

MAX_LINES = 25
BUILDERS = {"append", "extend", "setdefault", "insert", "update"}        # calls that grow a collection


def cell_problems(source: str) -> list[str]:
    """What a code cell does that belongs in a helper: over MAX_LINES lines, a def / class / lambda, or a for / while
    loop whose body grows a collection (append, extend, setdefault, insert, update, `x[k] = ...`, `x += ...`)."""
    problems = []
    lines = source.strip("\n").splitlines()
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines (at most {MAX_LINES})")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            problems.append(f"line {node.lineno}: defines a function or class")
        if isinstance(node, (ast.For, ast.While)):
            for inner in (n for stmt in node.body + node.orelse for n in ast.walk(stmt)):
                grows = (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                         and inner.func.attr in BUILDERS)
                grows |= isinstance(inner, ast.Assign) and any(isinstance(t, ast.Subscript) for t in inner.targets)
                grows |= isinstance(inner, ast.AugAssign)
                if grows:
                    problems.append(f"line {node.lineno}: a loop that builds a table (line {inner.lineno})")
                    break
    return problems


def test_the_check_finds_each_kind_of_logic():
    assert cell_problems("rows = [f(x) for x in xs]\nfor r in rows:\n    display(r)\n") == []
    assert cell_problems("x = 1\n" * (MAX_LINES + 1))[0].startswith(f"{MAX_LINES + 1} lines")
    assert "defines a function" in cell_problems("def f(x):\n    return x\n")[0]
    assert "defines a function" in cell_problems("show = lambda rows: print(rows)\n")[0]
    for body in ("rows.append(x)", "d.setdefault(k, []).append(x)", "d[x] = 1", "total += x"):
        assert "builds a table" in cell_problems(f"for x in xs:\n    {body}\n")[0], body
    assert "builds a table" in cell_problems("while xs:\n    out.extend(xs.pop())\n")[0]


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_no_notebook_cell_holds_logic(path):
    nb = nbformat.read(path, as_version=4)
    problems = [f"cell {i}: {p}" for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                for p in cell_problems(cell.source)]
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_every_notebook_is_valid_as_saved(path):
    """Valid nbformat 4.5 as it lies on disk, every cell with an id of its own (nbformat refuses repeated ids): a cell
    without one makes nbformat warn in every run's log (and it will be an error in later nbformat versions)."""
    raw = json.loads(path.read_text())
    missing = [i for i, cell in enumerate(raw["cells"]) if "id" not in cell]
    assert not missing, f"{path.name}: cells {missing} have no id"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbformat.validate(raw)


def test_what_a_notebook_imports_before_setup_prints_no_banner():
    """A notebook's imports before `setup()` (which silences the libraries' known banners) load no qwen_tts, whose
    import prints them: in the executed notebook they would land in that cell's output."""
    import subprocess
    import sys

    from helpers.experiment.run.params import REPO_ROOT

    heads = set()
    for path in notebooks():
        cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        source = next(c.source for c in cells if "setup(globals())" in c.source)
        heads |= {line for line in source.split("setup(globals())")[0].splitlines()
                  if line.startswith(("from ", "import "))}
    probe = "\n".join(sorted(heads)) + "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('qwen_tts')))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
