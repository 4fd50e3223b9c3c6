"""The one check of an integer setting: an int (never a bool) at least a minimum, else a ValueError that names the
setting, its value and what is allowed.

    self.depth = positive_int("depth", depth)           # "depth must be an integer >= 1, got 0"
    int_at_least("predictor_steps", steps, 0)           # "predictor_steps must be an integer >= 0, got -1"
"""

from __future__ import annotations


def int_at_least(name: str, value, minimum: int, error: type[ValueError] = ValueError) -> int:
    """`value` if it is an int >= `minimum` (a bool is not an int here); else `error` naming `name` and the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def positive_int(name: str, value, error: type[ValueError] = ValueError) -> int:
    """`value` if it is an int >= 1 (not a bool); else `error`: "<name> must be an integer >= 1, got <value>"."""
    return int_at_least(name, value, 1, error)
