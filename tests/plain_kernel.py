"""A notebook run the way JupyterLab runs it, for tests: a plain python3 kernel (no runner variable, so the try-it
cells build live ipywidgets), every cell in order, then every control moved as a person would move it.

    nb, renders = run_plain(path, {"params_file": "params/smoke.yaml", ...}, cwd)

`renders` holds one entry per control move (the notebook's first renders included): the control, the value set
and the outputs of that render (the interact's output area and the cell that moved the control), so a test can
check that none holds an error or a warning. Moves: a menu to each other option, a slider to its ends, a checkbox
flipped, a number box one up, a text box retyped; then the control back to its value; then the combinations asked
for (several controls set in one cell, as a person sets one after the other), and back.
"""

from __future__ import annotations

import json
import re

from nbclient import NotebookClient
from nbclient.output_widget import OutputWidget
from nbformat.v4 import new_code_cell
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

# Kernel side: the live interact boxes and, per control, the values to move it to (JSON on stdout).
FIND_CONTROLS = """
import json as _json
import ipywidgets as _w
from ipywidgets.widgets import widget as _widget

def _moves(c):
    given = c.value
    if isinstance(c, _w.Dropdown):
        return [o for o in c.options if o != given]
    if isinstance(c, (_w.IntSlider, _w.FloatSlider)):
        return [v for v in (c.min, c.max) if v != given]
    if isinstance(c, _w.Checkbox):
        return [not given]
    if isinstance(c, (_w.IntText, _w.FloatText)):
        return [given + 1]
    return [given + " "]

_boxes = [w for w in list(_widget._instances.values()) if isinstance(w, _w.interactive)]
print(_json.dumps([{"out": b.out.model_id, "controls": [
    {"name": c.description, "given": c.value, "moves": _moves(c)} for c in b.kwargs_widgets]} for b in _boxes]))
"""


class ShownOutput(OutputWidget):
    """nbclient's stand-in for a front end's output widget, which records what the widget shows (the client's
    `widget_state`) without writing it back to the kernel. That write is a message on the shell socket sent while the
    client waits on the same socket for the cell's reply; with it, a control move's reply was left unread in one move
    of a few dozen, and the cell never ended (its timeout did not fire either). Nothing the notebooks do reads it."""

    def sync_state(self) -> None:
        pass


# Printed text that reads as a failure or a warning ("Traceback (most recent call last)", "UserWarning: ...").
FAILURE_TEXT = re.compile(r"Traceback \(most recent call last\)|\b\w*(Warning|Error)\b:")


def problems_in(outputs) -> list[str]:
    """The errors, stderr streams and printed tracebacks or warnings among `outputs` (nbformat outputs), one line
    each."""
    found = []
    for o in outputs:
        if o.get("output_type") == "error":
            found.append(f"{o.get('ename')}: {o.get('evalue')}")
        elif o.get("output_type") == "stream" and o.get("name") == "stderr":
            found.append(f"stderr {o.get('text', '').strip()[:200]!r}")
        elif o.get("output_type") == "stream" and FAILURE_TEXT.search(o.get("text", "")):
            found.append(f"printed {FAILURE_TEXT.search(o['text']).group(0)!r}")
    return found


def run_plain(path, parameters: dict, cwd, combos=(), timeout: int = 1200):
    """Execute the notebook at `path` with `parameters` (injected as papermill injects them) in a plain python3
    kernel started in `cwd`, then move every control its try-it cells built, then set each of `combos` ({control:
    value}, applied to the boxes that have all of those controls, in one cell, then set back); (the executed
    notebook, renders)."""
    nb = parameterize_notebook(load_notebook_node(str(path)), parameters)
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = ShownOutput
    renders = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        nb.cells.append(new_code_cell(FIND_CONTROLS))        # a scratch cell (nbclient writes a cell back by index)
        probe = client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
        text = "".join(o.get("text", "") for o in probe.outputs if o.get("name") == "stdout")
        assert not problems_in(probe.outputs) and text, probe.outputs
        for b, box in enumerate(json.loads(text)):
            renders.append({"control": None, "value": None, "cell": [],
                            "shown": list(client.widget_state[box["out"]].get("outputs", []))})     # the first
            for c, control in enumerate(box["controls"]):
                for value in [*control["moves"], control["given"]]:
                    nb.cells[-1] = new_code_cell(f"_boxes[{b}].kwargs_widgets[{c}].value = {value!r}")
                    moved = client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
                    renders.append({"control": control["name"], "value": value, "cell": list(moved.outputs),
                                    "shown": list(client.widget_state[box["out"]].get("outputs", []))})
            names = [c["name"] for c in box["controls"]]
            for combo in [c for c in combos if set(c) <= set(names)]:
                given = {k: box["controls"][names.index(k)]["given"] for k in combo}
                for values in (combo, given):
                    nb.cells[-1] = new_code_cell("\n".join(f"_boxes[{b}].kwargs_widgets[{names.index(k)}].value = {v!r}"
                                                           for k, v in values.items()))
                    moved = client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
                    renders.append({"control": ", ".join(combo), "value": values, "cell": list(moved.outputs),
                                    "shown": list(client.widget_state[box["out"]].get("outputs", []))})
        nb.cells.pop()
        client.set_widgets_metadata()
    return nb, renders
