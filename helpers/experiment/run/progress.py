"""What a running notebook is doing, on the runner's console: its latest line of output, as the kernel writes it.

papermill hands every stream output of the kernel (stdout and stderr: build steps, progress bars, prints) to
`ProgressLine.write` while the cell runs. On a terminal the line after the notebook's name is rewritten in
place (at most a few times a second); elsewhere (CI logs, pipes) the latest line is printed at most once every
`every` seconds, so a log shows progress without drowning in it. Progress bars and build notes do not reach the
executed notebook: its kernel appends them to the notebook's log (`helpers.experiment.run.quiet.route_progress`), and
`LogTail` feeds what is appended there to the same line.
"""

from __future__ import annotations

import codecs
import re
import shutil
import sys
import threading
import time
from pathlib import Path


class ProgressLine:
    """A file-like sink for one notebook's output streams that shows its latest non-empty line after `prefix`."""

    def __init__(self, prefix: str, stream=None, every: float = 20.0):
        self.prefix, self.stream, self.every = prefix, stream or sys.stdout, every
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.latest, self.shown, self.last_time = "", "", 0.0
        self.width = shutil.get_terminal_size((100, 20)).columns
        self.lock = threading.Lock()              # written from papermill's callbacks and from a LogTail

    def write(self, text: str) -> int:
        lines = [line.strip() for line in re.split(r"[\r\n]+", text)]
        lines = [line for line in lines if line and not line.startswith("[IPKernelApp]")]
        if lines:
            with self.lock:
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


class LogTail:
    """While running (a context manager), every `interval` seconds what was appended to the file `path` goes to
    `sink.write` (a ProgressLine): the kernel's progress bars and build notes, which it writes to its log."""

    def __init__(self, path: str | Path, sink, interval: float = 0.2):
        self.path, self.sink, self.interval = Path(path), sink, interval
        self.offset, self.stop = 0, threading.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")   # a character split across reads
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "LogTail":
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self._read()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        if data:
            self.offset += len(data)
            self.sink.write(self.decoder.decode(data))
