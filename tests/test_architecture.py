"""The package's layers: every import under helpers/ (module level and inside functions) runs one way, and
no module imports itself back through others.

Layers, from the bottom: artifacts < method < adapter < backends < measure < report < experiment. A module
may import its own layer and the layers below it; the two backends never import each other.

The report layer holds a module per notebook (`nbNN_*`, siblings of the same number allowed) beside shared modules
of one concept each, none longer than MAX_REPORT_LINES lines. Only notebooks (and tests) import a notebook's module:
no script and no other module of helpers/ does, save that notebook's own siblings, so what several places show lives
in a shared module. A notebook's code cells call a function and show its result: no code cell holds more than
MAX_PROSE_LINES lines of f-string prose (`fstring_lines`); longer prose is a report function returning Markdown.
"""

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "helpers"
NOTEBOOKS = ROOT.parent / "notebooks"
SCRIPTS = ROOT.parent / "scripts"
MAX_REPORT_LINES = 400
MAX_PROSE_LINES = 5
LAYERS = ("artifacts", "method", "adapter", "backends", "measure", "report", "experiment")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The helpers modules a file imports anywhere in it (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:              # `from helpers.method import tree` -> helpers.method.tree
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("helpers."):
                found.add(t)
    return found


def layer(module: str) -> str | None:
    if module == "helpers.__main__":                 # `python -m helpers`: the runner's entry point
        return "experiment"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


GRAPH = {m: imports_of(p, set(modules())) for m, p in modules().items()}


def test_every_module_belongs_to_a_layer():
    stray = [m for m in GRAPH if m != "helpers" and layer(m) is None]
    assert not stray, f"modules outside the layer folders {LAYERS}: {stray}"


def test_every_layer_says_what_it_holds():
    for name in LAYERS[1:]:
        init = ROOT / name / "__init__.py"
        assert init.is_file() and len(ast.get_docstring(ast.parse(init.read_text())) or "") > 80, \
            f"{init} needs a docstring saying what the layer holds and what it may import"


def test_imports_run_down_the_layers():
    against = [f"{m} ({layer(m)}) imports {t} ({layer(t)})" for m, targets in GRAPH.items() if layer(m)
               for t in targets if layer(t) and LAYERS.index(layer(t)) > LAYERS.index(layer(m))]
    assert not against, "imports against the layer order:\n" + "\n".join(against)


def test_backends_do_not_import_each_other():
    crossing = [f"{m} imports {t}" for m, targets in GRAPH.items() for t in targets
                for a, b in (("mini", "qwen3"), ("qwen3", "mini"))
                if m.startswith(f"helpers.backends.{a}") and t.startswith(f"helpers.backends.{b}")]
    assert not crossing, "\n".join(crossing)


def test_no_import_cycles():
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in sorted(GRAPH.get(m, ())):
            visit(t)
        stack.pop()

    for m in sorted(GRAPH):
        visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The parser must see what the tests above judge: an import inside a function and a relative one."""
    pkg = tmp_path / "helpers" / "method"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("def f():\n    from ..experiment.stages import stages\n    from .b import x\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path / "helpers"
    try:
        found = imports_of(pkg / "a.py", {"helpers.method.a", "helpers.method.b", "helpers.experiment.stages.stages"})
    finally:
        ROOT = saved
    assert found == {"helpers.experiment.stages.stages", "helpers.method.b"}


def fstring_lines(source: str) -> int:
    """The lines of a code cell that lie inside an f-string literal: the union of the source spans of its
    `ast.JoinedStr` nodes (an implicit concatenation with an f-string part is one literal), each line counted once.
    IPython magics and shell lines (`%...`, `!...`) are blanked before parsing."""
    code = "\n".join("" if re.match(r"\s*[%!]", line) else line for line in source.splitlines())
    lines = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.JoinedStr):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return len(lines)


def code_cells() -> list[tuple[str, int, str]]:
    """(notebook, cell index, source) of every code cell of notebooks/."""
    cells = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                cells.append((path.name, i, "".join(cell["source"])))
    return cells


def test_the_report_layer_has_a_module_per_notebook():
    found = sorted(p.name for p in (ROOT / "report").glob("*.py"))
    notebooks = sorted(p.stem[:2] for p in NOTEBOOKS.glob("*.ipynb"))
    assert notebooks and all(any(f.startswith(f"nb{n}_") for f in found) for n in notebooks), (notebooks, found)


def test_no_report_module_is_longer_than_the_limit():
    long = {p.name: n for p in sorted((ROOT / "report").glob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_REPORT_LINES}
    assert not long, f"modules of helpers/report/ over {MAX_REPORT_LINES} lines (split them by what they report): {long}"


def notebook_number(module: str) -> str | None:
    """"06" for `helpers.report.nb06_latency` (a notebook's module), None for any other module."""
    found = re.fullmatch(r"helpers\.report\.nb(\d\d)_\w+", module)
    return found and found.group(1)


def notebook_imports(graph: dict[str, set[str]]) -> list[str]:
    """"importer imports target" for each import of a notebook's module by a module that is not one of that
    notebook's own (graph: module -> the helpers modules it imports)."""
    return [f"{m} imports {t}" for m, targets in sorted(graph.items()) for t in sorted(targets)
            if notebook_number(t) and notebook_number(m) != notebook_number(t)]


def test_only_notebooks_import_a_notebook_module():
    scripts = {module_name(p): imports_of(p, set(modules())) for p in sorted(SCRIPTS.rglob("*.py"))}
    found = notebook_imports({**GRAPH, **scripts})
    assert not found, ("a notebook's module imported outside that notebook (move the shared piece to a shared module "
                       "of helpers/report/):\n" + "\n".join(found))


def test_the_notebook_import_check_tells_own_siblings_from_others():
    graph = {"helpers.report.nb08_report": {"helpers.report.nb08_summary", "helpers.report.nb06_latency"},
             "helpers.report.projection": {"helpers.report.paper"}, "scripts.bench_gpu": {"helpers.report.nb06_x"}}
    assert notebook_imports(graph) == ["helpers.report.nb08_report imports helpers.report.nb06_latency",
                                       "scripts.bench_gpu imports helpers.report.nb06_x"]


def test_no_notebook_cell_holds_more_than_a_few_lines_of_fstring_prose():
    long = [f"{nb} cell {i}: {n} lines" for nb, i, source in code_cells() if (n := fstring_lines(source)) > MAX_PROSE_LINES]
    assert not long, (f"code cells with more than {MAX_PROSE_LINES} lines of f-string prose (move the prose into the "
                      "notebook's helpers.report module, a function returning Markdown):\n" + "\n".join(long))


def test_the_prose_count_counts_fstring_lines_only():
    assert fstring_lines('x = "plain"\nprint(f"a {x}"\n      f"b"\n      "c")\n%time y = 1\n') == 3
    assert fstring_lines('s = ("one "\n     "two")\n') == 0
    assert fstring_lines('display(f"{a}" + f"{b}")\nz = f"""\n{c}\n"""\n') == 4


def private_method_names(path: Path, method_names: set[str]) -> list[str]:
    """`x._name` in the file where `_name` is defined in helpers/method/ (a private attribute or function of the
    method), `x` not self or cls."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr in method_names
                and ast.unparse(node.value) not in ("self", "cls")):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def private_names(paths) -> set[str]:
    """The private names (one underscore) the files define: functions, classes, attributes set on self."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            name = (node.name if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                    node.attr if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) else None)
            if name and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names


def test_nothing_outside_the_method_uses_its_private_names():
    """measure/, report/ and the rest reach the decoder through its public face (`Decoder.modules`, its runner)."""
    outside = [p for p in ROOT.rglob("*.py") if "method" not in p.relative_to(ROOT).parts] + list(SCRIPTS.glob("*.py"))
    names = private_names((ROOT / "method").glob("*.py")) - private_names(outside)   # the method's alone
    assert {"_Prepacked", "_sources"} <= names
    found = [hit for path in outside for hit in private_method_names(path, names)]
    assert found == [], found


def test_the_private_name_check_sees_a_use(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(core):\n    return core._build()\n")
    assert private_method_names(bad, {"_build"}) == ["bad.py:2 core._build"]
