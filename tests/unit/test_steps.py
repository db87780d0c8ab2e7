"""testkit.steps: a step names itself in the log and in any failure inside it, and changes nothing
else."""

from __future__ import annotations

import pytest

from testkit.steps import step


def test_a_step_is_logged_when_it_begins(capsys: pytest.CaptureFixture[str]) -> None:
    with step("sleeps"):
        assert capsys.readouterr().err.endswith("] sleeps\n")
    assert capsys.readouterr().err == ""


def test_a_failure_inside_a_step_is_raised_as_it_was_with_the_step_named() -> None:
    with pytest.raises(AssertionError) as raised, step("wakes up"):
        raise AssertionError("the replicas")
    assert str(raised.value) == "the replicas"
    assert raised.value.__notes__ == ["in step: wakes up"]


def test_nested_steps_are_named_innermost_first() -> None:
    with pytest.raises(TimeoutError) as raised, step("wakes up"), step("reads its Event"):
        raise TimeoutError("no Event")
    assert raised.value.__notes__ == ["in step: reads its Event", "in step: wakes up"]


def test_a_step_that_passes_returns_what_its_block_made() -> None:
    with step("counts"):
        made = [1, 2]
    assert made == [1, 2]
