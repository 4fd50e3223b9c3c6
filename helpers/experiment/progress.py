"""What a running notebook is doing, on the runner's console: its latest line of output, as the kernel writes it.

papermill hands every stream output of the kernel (stdout and stderr: build steps, progress bars, prints) to
`ProgressLine.write` while the cell runs. On a terminal the line after the notebook's name is rewritten in
place (at most a few times a second); elsewhere (CI logs, pipes) the latest line is printed at most once every
`every` seconds, so a log shows progress without drowning in it. The executed notebook keeps its own outputs.
"""

from __future__ import annotations

import re
import shutil
import sys
import time


class ProgressLine:
    """A file-like sink for one notebook's output streams that shows its latest non-empty line after `prefix`."""

    def __init__(self, prefix: str, stream=None, every: float = 20.0):
        self.prefix, self.stream, self.every = prefix, stream or sys.stdout, every
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.latest, self.shown, self.last_time = "", "", 0.0
        self.width = shutil.get_terminal_size((100, 20)).columns

    def write(self, text: str) -> int:
        lines = [line.strip() for line in re.split(r"[\r\n]+", text)]
        lines = [line for line in lines if line and not line.startswith("[IPKernelApp]")]
        if lines:
            self.latest = lines[-1]
            self._show()
        return len(text)

    def flush(self) -> None:
        pass

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.latest == self.shown or (not force and now - self.last_time < (0.2 if self.tty else self.every)):
            return
        self.shown, self.last_time = self.latest, now
        if self.tty:
            line = f"{self.prefix} {self.latest}"[:self.width - 1]
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(f"  {self.prefix} {self.latest}\n")
        self.stream.flush()

    def close(self, result: str) -> None:
        """End the notebook's line with `result` ("ok (12 s)", "FAILED")."""
        if self.tty:
            self.stream.write(f"\r\033[K{self.prefix} {result}\n")
        else:
            self.stream.write(f"{self.prefix} {result}\n")
        self.stream.flush()
