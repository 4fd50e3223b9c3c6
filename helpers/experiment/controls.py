"""Controls for a notebook's "try it yourself" cells: ipywidgets where a person runs the notebook, plain values where
the runner executes it (`quiet.under_runner`).

    show(render, {"depth": 2, "tree": "0; 1"}, {"depth": (1, 4)})
"""

from __future__ import annotations

from helpers.experiment.quiet import under_runner


def show(render, values: dict, ranges: dict | None = None) -> None:
    """render(**values) once where the runner executes the notebook; in JupyterLab the same with a control per
    value (`ranges`: (lo, hi) for a slider of ints, (lo, hi, step) for floats, a list for a menu; a text box
    otherwise), each change re-rendering."""
    if under_runner():
        render(**values)
        return
    import ipywidgets as w

    def control(name, value):
        r = (ranges or {}).get(name)
        if isinstance(r, list):
            return w.Dropdown(options=r, value=value, description=name)
        if isinstance(r, tuple) and isinstance(value, int):
            return w.IntSlider(value=value, min=r[0], max=r[1], description=name)
        if isinstance(r, tuple):
            return w.FloatSlider(value=value, min=r[0], max=r[1], step=r[2], description=name)
        return w.Text(value=str(value), description=name, continuous_update=False)

    w.interact(render, **{k: control(k, v) for k, v in values.items()})
