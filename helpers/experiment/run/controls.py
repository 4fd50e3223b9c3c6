"""Controls for a notebook's "try it yourself" cells: ipywidgets where a person runs the notebook, plain values where
the runner executes it (`quiet.under_runner`).

    show(render, {"depth": 2, "tree": "0; 1"}, {"depth": (1, 4)})
"""

from __future__ import annotations

import inspect
from numbers import Integral, Real

from helpers.experiment.run.quiet import under_runner

NOT_SHOWN = "**Not shown:**"        # what a live render that refuses its values shows before the reason


def control_specs(values: dict, ranges: dict | None = None) -> dict[str, tuple[str, dict]]:
    """name -> (ipywidgets class, its arguments): the control `show` builds for each value, one that hands back a
    value of the given value's type (a menu: one of its options). A slider's range is widened to hold its value;
    a value no control returns as itself (a tuple, None, ...) or a menu without it is refused."""
    ranges = ranges or {}
    if unknown := set(ranges) - set(values):
        raise ValueError(f"ranges for {sorted(unknown)}, which are not among the values {sorted(values)}")
    specs = {}
    for name, value in values.items():
        r, number = ranges.get(name), isinstance(value, Real) and not isinstance(value, bool)
        if isinstance(r, list):
            if value not in r:
                raise ValueError(f"{name} = {value!r} is not in its menu {r}")
            specs[name] = "Dropdown", {"options": r, "value": value}
        elif isinstance(r, tuple) and number and len(r) in (2, 3):
            lo, hi = min(r[0], value), max(r[1], value)
            if isinstance(value, Integral) and not all(isinstance(x, Integral) for x in r):
                raise ValueError(f"{name} = {value!r} is an int, its range {r!r} is not: write the value as a float")
            if isinstance(value, Integral):
                specs[name] = "IntSlider", {"value": int(value), "min": lo, "max": hi, "step": r[2] if r[2:] else 1}
            else:
                specs[name] = "FloatSlider", {"value": float(value), "min": lo, "max": hi,
                                              "step": r[2] if r[2:] else (hi - lo) / 100}
        elif r is not None:
            raise ValueError(f"the range of {name} = {value!r} must be a list (a menu) or (lo, hi[, step]) of "
                             f"numbers around a number, not {r!r}")
        elif isinstance(value, bool):
            specs[name] = "Checkbox", {"value": value}
        elif isinstance(value, Integral):
            specs[name] = "IntText", {"value": int(value)}
        elif isinstance(value, Real):
            specs[name] = "FloatText", {"value": float(value)}
        elif isinstance(value, str):
            specs[name] = "Text", {"value": value, "continuous_update": False}
        else:
            raise TypeError(f"no control returns {name} = {value!r} as a {type(value).__name__}: pass it as a str, "
                            "bool, int or float, or give it a menu in ranges")
    return specs


def show(render, values: dict, ranges: dict | None = None) -> None:
    """render(**values) once where the runner executes the notebook; in JupyterLab the same with a control per
    value (`ranges`: (lo, hi[, step]) for a slider of the value's type, a list for a menu; a checkbox, a number box or
    a text box otherwise: `control_specs`), each change re-rendering. `render` is any callable (a function, a
    functools.partial, a bound method) that takes the values by name. Live, a render that raises ValueError (values
    that do not go together, a typed value it cannot read) shows its message on one line after `NOT_SHOWN`, not a
    traceback; under the runner it raises (the notebook's own values must work)."""
    specs = control_specs(values, ranges)
    try:
        inspect.signature(render).bind(**values)        # live, interact would only show the TypeError in its output
    except ValueError:                                  # no signature to check (some builtins)
        pass
    if under_runner():
        render(**values)
        return
    import ipywidgets as w

    def rerender(**chosen):         # a function: interact checks its call with inspect.getcallargs, which reads
        try:                        # __name__ (a partial or a callable object has none)
            render(**chosen)
        except ValueError as e:     # values that do not go together: one line in the output area, no traceback
            from IPython.display import Markdown, display
            display(Markdown(f"{NOT_SHOWN} {' '.join(str(e).split())}"))

    w.interact(rerender, **{k: getattr(w, cls)(description=k, **kw) for k, (cls, kw) in specs.items()})
