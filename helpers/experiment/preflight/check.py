"""One pre-flight check's outcome: ok, FAILED (with what to do) or skipped (what it needed failed first).

    c = outcome("cuda", check_cuda, P)      # runs it: a returned line is ok, PreflightError FAILED, Skipped skipped
    print(c.line())                         # "cuda                 ok: torch 2.9.1 (CUDA 13.0) sees 1 GPU(s): ..."
"""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 22                                        # the check names' column


class PreflightError(ValueError):
    """A check that failed; the message says what was found and what to do."""


class Skipped(Exception):
    """A check that cannot run because another one failed first; the message says which."""


@dataclass(frozen=True)
class Check:
    name: str
    status: str                                   # "ok", "FAILED" or "skipped"
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"

    def line(self) -> str:
        return f"{self.name:<{WIDTH}} {self.status}: {self.detail}"


def outcome(name: str, check, *args) -> Check:
    """Run `check(*args)` (it returns the ok line, or raises PreflightError / Skipped) into a Check."""
    try:
        return Check(name, "ok", check(*args))
    except PreflightError as err:
        return Check(name, "FAILED", str(err))
    except Skipped as err:
        return Check(name, "skipped", str(err))


def size(n: float) -> str:
    """Bytes, in the largest binary unit that keeps a digit before the point: "1.9 GiB", "340.0 KiB"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def count(n: int) -> str:
    """A parameter count in words: "0.91 billion", "1.2 million", "5120"."""
    return f"{n / 1e9:.2f} billion" if n >= 1e8 else f"{n / 1e6:.1f} million" if n >= 1e5 else str(n)
