"""The machine's calibration: fixed work, the same on every run, timed in CPU milliseconds."""

from __future__ import annotations

import json

import pytest

from bench.calibration import OBJECTS, calibrate, page, round_ms


def test_the_page_is_the_same_list_every_time() -> None:
    text = page()
    assert text == page()
    items = json.loads(text)["items"]
    assert len(items) == OBJECTS
    assert len({item["metadata"]["name"] for item in items}) == OBJECTS


def test_a_round_and_a_calibration_take_cpu_time() -> None:
    text = page(50)
    assert round_ms(text, 1) > 0
    assert calibrate(1) > 0


def test_no_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="rounds: 0"):
        calibrate(0)
