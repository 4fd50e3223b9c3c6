"""Controls for a notebook's "try it yourself" cells: ipywidgets where a person runs the notebook, plain values where
the runner executes it (`python -m helpers`, which names the notebook's log in PROGRESS_ENV for its kernel).

    show(render, {"depth": 2, "tree": "0; 1"}, {"depth": (1, 4)})
"""

from __future__ import annotations

import os

from helpers.experiment.quiet import PROGRESS_ENV


def interactive() -> bool:
    """True where a person runs the notebook (JupyterLab), False where the runner executes it."""
    return not os.environ.get(PROGRESS_ENV)


def show(render, values: dict, ranges: dict | None = None) -> None:
    """render(**values) once where the runner executes the notebook; in JupyterLab the same with a control per
    value (`ranges`: (lo, hi) for a slider of ints, (lo, hi, step) for floats, a list for a menu; a text box
    otherwise), each change re-rendering."""
    if not interactive():
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
