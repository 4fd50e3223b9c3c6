"""What an executed notebook must not hold: anything written to stderr (warnings, banners, bars: a cell's real error is
an `error` output, not a stream), progress-bar lines, the libraries' known banners, machine paths, outputs longer
than a screen (but in a cell tagged `long-output`, whose long output is its point: 08's report), figures without
a caption, and figures whose record (axes and legend, `helpers.report.plots.figure_record`) shows a log axis not said in
its label or derived points called the paper's.

    problems = output_problems(nbformat.read(path, as_version=4), machine_paths=[REPO_ROOT, sys.prefix])

A test runs it over every notebook of the smoke run (`tests/test_notebooks.py`); each problem names the cell.
"""

from __future__ import annotations

import re

from helpers.experiment.run.quiet import BANNERS

SCREEN_LINES = 40                 # an output longer than this is a dump, not something a reader reads
BAR = re.compile(r"\d+%\|| \d+/\d+ \[\d+:\d+|\d(it/s|s/it)\]")          # tqdm: " 45%|", " 3/29 [00:01", "2.1it/s]"
CAPTION = "*Figure"                 # how `RunOutputs.figure` starts a caption


def output_text(output) -> str:
    """The text a reader sees of one output (stream, error, or the text of a display/result; images aside)."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    for kind in ("text/markdown", "text/plain"):
        if kind in data and "image/png" not in data:
            text = data[kind]
            return "".join(text) if isinstance(text, list) else text
    return ""


LOG_SCALES = ("log", "symlog", "logit")
NOT_THE_PAPERS = re.compile(r"derived|inferred", re.IGNORECASE)


def figure_problems(record: dict | None) -> list[str]:
    """What a figure's record (`helpers.report.plots.figure_record`, kept in its output's metadata) shows
    wrong: a log axis whose label does not say "log", a legend entry that calls derived or inferred points "paper"
    without saying so. A figure shown without a record has nothing to check."""
    if not record:
        return []
    problems = [f"a {a['scale']} {a['axis']} axis whose label does not say so: {a['label']!r}"
                for a in record.get("axes", []) if a["scale"] in LOG_SCALES and "log" not in a["label"].lower()]
    problems += [f"a legend calls {e['provenance']} points the paper's: {e['label']!r}"
                 for e in record.get("legend", []) if e.get("provenance") and re.search(r"paper", e["label"], re.I)
                 and not NOT_THE_PAPERS.search(e["label"])]
    return problems


def output_problems(nb, machine_paths=(), parameter_paths=None) -> list[str]:
    """Every problem of an executed notebook `nb` (an nbformat node), one line each. `machine_paths`: absolute
    paths no output or parameters cell may show; `parameter_paths`: those the injected parameters cell may not
    show (default: the same; a run given `-p output_dir=/tmp/x` shows that value there, as it was given)."""
    machine = [str(p) for p in machine_paths]
    in_parameters = machine if parameter_paths is None else [str(p) for p in parameter_paths]
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"cell {i}"
        if {"parameters", "injected-parameters"} & set(cell.metadata.get("tags", [])):
            problems += [f"{where}: parameters show the machine path {p}" for p in in_parameters if p in cell.source]
        long_ok = "long-output" in cell.metadata.get("tags", [])      # a cell whose long output is its point
        streams: dict[str, str] = {}
        outputs = cell.get("outputs", [])
        for k, output in enumerate(outputs):
            text = output_text(output)
            if output.get("output_type") == "stream":
                streams[output["name"]] = streams.get(output["name"], "") + text
                if output["name"] == "stderr":
                    first = next((line.strip() for line in re.split(r"[\r\n]+", text) if line.strip()), "")
                    problems.append(f"{where}: stderr output {first[:80]!r}")
            elif len(text.splitlines()) > SCREEN_LINES and not long_ok:
                problems.append(f"{where}: an output of {len(text.splitlines())} lines (more than {SCREEN_LINES})")
            if "image/png" in output.get("data", {}):
                following = [output_text(o) for o in outputs[k + 1:k + 2]]
                if not (following and following[0].startswith(CAPTION)):
                    problems.append(f"{where}: a figure without a caption right after it")
                problems += [f"{where}: {p}" for p in figure_problems(output.get("metadata", {}).get("figure"))]
        for name, text in streams.items():
            if len(text.splitlines()) > SCREEN_LINES and not long_ok:
                problems.append(f"{where}: {len(text.splitlines())} lines of {name} (more than {SCREEN_LINES})")
        for output in outputs:
            text = output_text(output)
            bars = [line for line in re.split(r"[\r\n]+", text) if BAR.search(line)]
            if bars:
                problems.append(f"{where}: progress-bar output {bars[0].strip()[:80]!r}")
            problems += [f"{where}: the banner {b!r}" for b in BANNERS if b in text]
            problems += [f"{where}: an output shows the machine path {p}" for p in machine if p in text]
    return problems
