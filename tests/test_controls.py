"""The try-it controls (`helpers.experiment.run.controls.show`) as a person meets them: live ipywidgets where the
runner's variable is unset, for any callable render, each value handed back with its own type, each control change
re-rendering; and the notebooks' own try-it cells run that way."""

import logging
from functools import partial
from types import SimpleNamespace

import ipywidgets
import IPython.display
import nbformat
import pytest
import torch
from ipywidgets.widgets import interaction

from helpers.experiment.run.controls import show
from helpers.experiment.run.quiet import PROGRESS_ENV, under_runner
from helpers.experiment.run.runner import notebooks

VALUES = {"tree": "0; 1", "depth": 2, "temperature": 0.9, "menu": "b", "flag": False, "count": 3, "scale": 0.5,
          "seed": 25}
RANGES = {"depth": (1, 4), "temperature": (0.1, 2.0, 0.1), "menu": ["a", "b", "c"], "seed": (0, 20)}
CHANGES = {"tree": "0; 0,0", "depth": 4, "temperature": 1.5, "menu": "c", "flag": True, "count": 7, "scale": 0.25,
           "seed": 3}


def record(calls, label, **values):
    """A render: appends (label, values) to `calls`."""
    calls.append((label, values))


@pytest.fixture
def live(monkeypatch):
    """Not under the runner (its variable unset); returns the list of widgets ipywidgets' interact displays."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert not under_runner()
    shown = []
    monkeypatch.setattr(interaction, "display", shown.append)
    return shown


def controls_of(box):
    """name -> control of an interact box (its output area aside)."""
    return {c.description: c for c in box.children if hasattr(c, "value")}


def typed(values):
    return {k: (type(v), v) for k, v in values.items()}


def test_live_controls_render_a_partial_and_rerender_on_each_change(live):
    calls = []
    assert show(partial(record, calls, "partial"), dict(VALUES), RANGES) is None
    assert len(live) == 1 and calls == [("partial", VALUES)]                  # rendered once, with the given values
    assert typed(calls[0][1]) == typed(VALUES)
    box = live[0]
    assert isinstance(box, ipywidgets.interactive)
    made = controls_of(box)
    assert set(made) == set(VALUES)
    assert (made["seed"].min, made["seed"].max, made["seed"].value) == (0, 25, 25)      # widened, not clamped to 20
    expected = dict(VALUES)
    for name, value in CHANGES.items():                # drive each control as a person would: one render per change
        made[name].value = value
        expected[name] = value
        assert len(calls) == 2 + list(CHANGES).index(name)
        assert typed(calls[-1][1]) == typed(expected), name


def test_live_controls_take_a_lambda_and_a_bound_method(live):
    calls = []

    class Renderer:
        def render(self, depth, tree):
            calls.append(("method", {"depth": depth, "tree": tree}))

    show(lambda **v: calls.append(("lambda", v)), {"depth": 2, "tree": "0"}, {"depth": (1, 4)})
    show(Renderer().render, {"depth": 2, "tree": "0"}, {"depth": (1, 4)})
    assert [label for label, _ in calls] == ["lambda", "method"]
    controls_of(live[1])["depth"].value = 3
    assert calls[-1] == ("method", {"depth": 3, "tree": "0"})


def test_under_the_runner_the_values_render_once_without_controls(monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "log")
    monkeypatch.setattr(interaction, "display", lambda w: pytest.fail("a control was shown under the runner"))
    calls = []
    show(partial(record, calls, "runner"), dict(VALUES), RANGES)
    assert calls == [("runner", VALUES)]


@pytest.mark.parametrize("values, ranges, error", [
    ({"tree": (0, 1)}, None, "no control returns tree"),              # a tuple would come back as a str
    ({"menu": "d"}, {"menu": ["a", "b"]}, "not in its menu"),
    ({"depth": 2}, {"depht": (1, 4)}, "not among the values"),
    ({"depth": 2}, {"depth": (0.5, 4.0)}, "is an int, its range"),
    ({"depth": 2, "other": 1}, None, "unexpected keyword"),           # the render takes no `other`
])
def test_values_no_control_hands_back_are_refused_in_both_modes(monkeypatch, values, ranges, error):
    for runner in ("log", ""):
        monkeypatch.setenv(PROGRESS_ENV, runner)
        with pytest.raises((ValueError, TypeError), match=error):
            show(lambda depth=2, tree="0", menu="a": None, values, ranges)


def try_it_cells():
    """(notebook name, source) of every notebook code cell that calls `controls.show`."""
    return [(path.name, cell.source) for path in notebooks() for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "code" and "controls import show" in cell.source]


def test_every_try_it_cell_is_found():
    assert {name[:2] for name, _ in try_it_cells()} == {"00", "03"}


@pytest.mark.parametrize("name, source", try_it_cells(), ids=[name[:2] for name, _ in try_it_cells()])
def test_a_notebooks_try_it_cell_renders_live_and_on_each_change(live, monkeypatch, caplog, name, source):
    """The cell, run with small stand-ins for the run's names (`P`, `cal`, `main`): its first render and the render
    after each control moves away from its value and back (a slider to its top or one step down, a menu to each other
    option, a text box retyped) display the result, and no render raises (interact would only log it)."""
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    table = torch.tensor([[0.5 ** (r + d + 1) for r in range(8)] for d in range(3)], dtype=torch.float64)
    namespace = {"P": SimpleNamespace(seed=0, depth=3, tree_size=16),
                 "cal": SimpleNamespace(tables={"offsets": table, "reused": table * 0.5}), "main": "offsets"}
    with caplog.at_level(logging.WARNING):
        exec(compile(source, name, "exec"), namespace)
        assert len(live) == 1, name
        renders = [len(shown)]
        for control in controls_of(live[0]).values():
            given = control.value
            if isinstance(control, ipywidgets.Dropdown):
                moves = [o for o in control.options if o != given]
            elif isinstance(control, (ipywidgets.IntSlider, ipywidgets.FloatSlider)):
                moves = [control.max if given != control.max else given - control.step]
            else:
                moves = [given + " "]                              # a text box: the same text, typed again
            for value in [*moves, given]:
                control.value = value
                renders.append(len(shown))
    assert not [r.getMessage() for r in caplog.records if "interact" in r.getMessage()], name
    assert renders[0] > 0 and all(b > a for a, b in zip(renders, renders[1:])), (name, renders)
    markdown = [o.data for o in shown if isinstance(o, IPython.display.Markdown)]
    assert len(markdown) >= len(renders), (name, markdown)


@pytest.mark.parametrize("number, impossible, possible", [
    ("03", {"max_depth": 1, "size": 64}, {"max_depth": 3}),         # 64 nodes, 8 ranks a depth: depth 1 holds 8
    ("00", {"depth": 1}, {"depth": 2}),                             # the typed tree "0; 1; 0,0" is 2 deep
    ("00", {"tree": "0; 1,0"}, {"tree": "0; 0,0"}),                 # a node without its parent
])
def test_a_try_it_cell_says_in_one_line_why_values_do_not_go_together(live, monkeypatch, caplog, number, impossible,
                                                                       possible):
    """Live, controls moved to values that do not go together (notebook 03: more nodes than the depth holds; 00: a
    tree deeper than K, or one that is no tree) show one line, after `NOT_SHOWN`, saying why and what to change, and
    no traceback; moved back to possible values the result is shown again."""
    from helpers.experiment.run.controls import NOT_SHOWN
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    table = torch.tensor([[0.5 ** (r + d + 1) for r in range(8)] for d in range(3)], dtype=torch.float64)
    namespace = {"P": SimpleNamespace(seed=0, depth=3, tree_size=16),
                 "cal": SimpleNamespace(tables={"offsets": table, "reused": table * 0.5}), "main": "offsets"}
    source = next(source for name, source in try_it_cells() if name.startswith(number))
    with caplog.at_level(logging.WARNING):
        exec(compile(source, number, "exec"), namespace)
        made = controls_of(live[0])
        for name, value in impossible.items():
            made[name].value = value
        said = [o.data for o in shown[-1:] if isinstance(o, IPython.display.Markdown)]
        assert said and said[0].startswith(NOT_SHOWN) and "\n" not in said[0], shown[-1:]
        assert ("lower N or raise max_depth" if number == "03" else "tree") in said[0], said
        before = len(shown)
        for name, value in possible.items():
            made[name].value = value
        assert not any(isinstance(o, IPython.display.Markdown) and o.data.startswith(NOT_SHOWN)
                       for o in shown[before:]) and len(shown) > before, shown[before:]
    assert not [r.getMessage() for r in caplog.records if "interact" in r.getMessage()]
