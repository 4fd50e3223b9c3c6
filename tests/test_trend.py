"""A curve said in words (helpers.report.nb01_data): every turn the plot shows is said, wiggles are not."""

import pytest

from helpers.report.nb01_data import turning_points, trend_words


def test_a_curve_that_rises_before_it_falls_says_so():
    steps, values = [0, 50, 100, 150, 200], [1.83, 1.92, 1.94, 1.80, 1.70]
    assert turning_points(values) == [0, 2, 4]
    assert trend_words(steps, values, digits=2) == "rose from 1.83 to 1.94 (step 100), then fell to 1.70 (step 200)"


def test_a_falling_curve_with_small_wiggles_fell():
    values = [5.0, 3.0, 3.05, 2.0, 1.0]                       # +0.05 is 1.25% of the range: no turn
    assert turning_points(values) == [0, 4]
    assert trend_words(range(5), values, digits=1) == "fell from 5.0 to 1.0"
    assert turning_points(values, tolerance=0.0) == [0, 1, 2, 4]


def test_flat_single_and_restless_curves():
    assert trend_words([0, 1, 2], [0.0033, 0.0033, 0.0033]) == "stayed at 0.003"
    assert trend_words([7], [2.5]) == "stayed at 2.500"
    zigzag = [0, 1] * 5
    assert trend_words(range(10), zigzag, digits=0) == "went up and down 8 times between 0 and 1, from 0 to 1"
    with pytest.raises(ValueError, match="as many steps"):
        trend_words([0, 1], [1.0])
    with pytest.raises(ValueError, match="share of the curve's range"):
        turning_points([1, 2], tolerance=1.5)
