"""testkit.steps: a step names itself in the log and in any failure inside it, and changes nothing
else."""

from __future__ import annotations

import ast
from pathlib import Path

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


SYSTEM = Path(__file__).resolve().parents[1] / "system"


def _is_step(node: ast.AST) -> bool:
    return isinstance(node, ast.With | ast.AsyncWith) and any(
        isinstance(item.context_expr, ast.Call)
        and isinstance(item.context_expr.func, ast.Name)
        and item.context_expr.func.id == "step"
        for item in node.items
    )


def _waits(test: ast.AST) -> int:
    """How many times the test waits on the cluster: its calls of a `wait...` function."""
    calls = (n.func for n in ast.walk(test) if isinstance(n, ast.Call))
    return sum(
        (
            f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        ).startswith("wait")
        for f in calls
    )


def stories_without_steps(source: str) -> list[str]:
    """The tests in `source` that wait on the cluster twice or more, a story, yet name no step."""
    return [
        test.name
        for test in ast.parse(source).body
        if isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef)
        and test.name.startswith("test_")
        and _waits(test) >= 2
        and not any(_is_step(n) for n in ast.walk(test))
    ]


def test_a_story_without_steps_is_found_and_one_with_them_is_not() -> None:
    source = (
        "def test_told(api):\n"
        "    with step('sleeps'):\n        wait_asleep(api)\n"
        "    with step('wakes'):\n        wait_woken(api)\n"
        "def test_untold(api):\n    wait_asleep(api)\n    testkit.wait_for(api)\n"
        "def test_one_wait(api):\n    wait_asleep(api)\n"
    )
    assert stories_without_steps(source) == ["test_untold"]


@pytest.mark.parametrize("module", sorted(p.name for p in SYSTEM.glob("test_*.py")))
def test_every_system_test_that_tells_a_story_names_its_steps(module: str) -> None:
    assert stories_without_steps((SYSTEM / module).read_text()) == []
