"""A curve said in words from its own numbers: where it rose, where it turned, where it fell.

    trend_words([0, 50, 100, 600], [1.831, 1.919, 1.942, 1.696])
    -> "rose from 1.831 to 1.942 (step 100), then fell to 1.696 (step 600)"

A sentence written from the first and last value alone ("1.831 -> 1.696") says a curve fell when it first rose;
this one names every turn larger than `tolerance` of the curve's range, so it cannot contradict the plot.
"""

from __future__ import annotations

from typing import Sequence

MOST_SEGMENTS = 4         # more turns than this are said as a fluctuation, not one by one


def turning_points(values: Sequence[float], tolerance: float = 0.1) -> list[int]:
    """Indices of the first value, of every turn and of the last value. A turn is an extreme the curve then leaves by
    more than `tolerance` x (max - min) the other way (smaller wiggles are not turns). [] for no value."""
    v = [float(x) for x in values]
    if not v:
        return []
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance is a share of the curve's range, in [0, 1); got {tolerance}")
    tol = tolerance * (max(v) - min(v))
    points, direction, extreme = [0], 0, 0
    for i in range(1, len(v)):
        if direction == 0:
            if abs(v[i] - v[0]) > tol:
                direction, extreme = (1 if v[i] > v[0] else -1), i
        elif direction * (v[i] - v[extreme]) >= 0:
            extreme = i                                    # further the same way
        elif direction * (v[extreme] - v[i]) > tol:
            points.append(extreme)                         # left the extreme by more than tol: a turn
            direction, extreme = -direction, i
    if points[-1] != len(v) - 1:
        points.append(len(v) - 1)
    return points


def trend_words(steps: Sequence, values: Sequence[float], digits: int = 3, tolerance: float = 0.1) -> str:
    """How `values` (at `steps`) went, from `turning_points`: "fell from a to b", "rose from a to b (step s), then
    fell to c (step t)", "stayed at a" (no change larger than rounding), or "went up and down n times between lo and
    hi, from a to b" (more than MOST_SEGMENTS segments). Values with `digits` decimals."""
    if len(steps) != len(values) or not values:
        raise ValueError(f"need as many steps as values, at least one; got {len(steps)} and {len(values)}")

    def f(x):
        return f"{x:.{digits}f}"

    points = turning_points(values, tolerance)
    if len(points) < 2 or f(min(values)) == f(max(values)):
        return f"stayed at {f(values[0])}"
    segments = list(zip(points, points[1:]))
    if len(segments) > MOST_SEGMENTS:
        return (f"went up and down {len(segments) - 1} times between {f(min(values))} and {f(max(values))}, from "
                f"{f(values[0])} to {f(values[-1])}")

    def moved(a, b):
        return "rose" if values[b] > values[a] else "fell"

    a, b = segments[0]
    words = f"{moved(a, b)} from {f(values[a])} to {f(values[b])}"
    if len(segments) == 1:
        return words
    words += f" (step {steps[b]})"
    return words + "".join(f", then {moved(a, b)} to {f(values[b])} (step {steps[b]})" for a, b in segments[1:])
