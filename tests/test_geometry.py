"""Tests of guirl.geometry: boxes and points in normalised screen space."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.geometry import box_center, distance_to_box, enlarge_box, iou, point_in_box

_coord = st.floats(-2.0, 2.0, allow_nan=False)


@st.composite
def boxes(draw):
    x1, x2 = sorted((draw(_coord), draw(_coord)))
    y1, y2 = sorted((draw(_coord), draw(_coord)))
    return (x1, y1, x2, y2)


@settings(max_examples=500, deadline=None)
@given(b=boxes())
def test_enlarge_by_one_is_the_identity(b):
    # bit for bit: a point on the box's own edge stays inside (centre +- half-size would move the
    # edge in the last bit)
    assert enlarge_box(b, 1.0) == b
    assert point_in_box((b[0], b[1]), enlarge_box(b, 1.0)) and point_in_box((b[2], b[3]), enlarge_box(b, 1.0))


@settings(max_examples=300, deadline=None)
@given(b=boxes(), f=st.floats(1.0, 3.0))
def test_enlarging_keeps_the_centre_and_contains_the_box(b, f):
    e = enlarge_box(b, f)
    assert box_center(e) == pytest.approx(box_center(b), abs=1e-9)
    assert e[0] <= b[0] + 1e-12 and e[1] <= b[1] + 1e-12 and e[2] >= b[2] - 1e-12 and e[3] >= b[3] - 1e-12


@pytest.mark.parametrize(
    "box, factor, expected",
    [
        ((0.1, 0.2, 0.3, 0.7), 1.0, (0.1, 0.2, 0.3, 0.7)),  # the box that used to move to 0.10000000000000002
        ((0.4, 0.4, 0.6, 0.6), 1.2, (0.38, 0.38, 0.62, 0.62)),  # UI-S1's 1.2x about the centre
        ((0.0, 0.0, 0.2, 0.1), 2.0, (-0.1, -0.05, 0.3, 0.15)),  # not clamped
    ],
)
def test_enlarge_box_table(box, factor, expected):
    assert enlarge_box(box, factor) == pytest.approx(expected)


def test_distance_to_box_and_iou():
    assert distance_to_box((0.5, 0.5), (0.4, 0.4, 0.6, 0.6)) == 0.0  # inside
    assert distance_to_box((0.9, 0.5), (0.4, 0.4, 0.6, 0.6)) == pytest.approx(0.3)
    assert iou((0, 0, 1, 1), (0, 0, 1, 1)) == 1.0 and iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0
