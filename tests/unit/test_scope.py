"""The scope rules: which questions are asked, in what order, and the scope the answers give."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from zeroscaler.core.scope import ResolvedScope, ReviewNeeded, resolve_scope


def walk(
    namespaced: bool, wanted: tuple[str, ...] | None, allowed: Mapping[str, bool]
) -> tuple[list[str], ResolvedScope]:
    """Answer every review needed from `allowed` (unlisted: no); the questions asked, the scope."""
    answers: dict[str, bool] = {}
    asked: list[str] = []
    while isinstance(step := resolve_scope(namespaced, "home", wanted, answers), ReviewNeeded):
        assert step.namespace not in answers, "asked twice"
        asked.append(step.namespace)
        answers[step.namespace] = allowed.get(step.namespace, False)
    return asked, step


ALL = "in all namespaces (zeroscaler.io/watch-namespaces: *)"


@pytest.mark.parametrize(
    ("namespaced", "wanted", "allowed", "asked", "scope"),
    [
        # Absent watch-namespaces: everywhere if allowed, else the workload's own namespace.
        (True, None, {"": True}, [""], ResolvedScope(True)),
        (True, None, {"home": True}, ["", "home"], ResolvedScope(True, frozenset({"home"}))),
        (True, None, {}, ["", "home"], ResolvedScope(False, denied=("in any namespace",))),
        (True, ("*",), {"": True}, [""], ResolvedScope(True)),
        (True, ("*",), {"home": True}, [""], ResolvedScope(False, denied=(ALL,))),
        # A list: each namespace asked in order, the denied ones named, in order.
        (
            True,
            ("a", "b"),
            {"a": True, "b": True},
            ["a", "b"],
            ResolvedScope(True, frozenset({"a", "b"})),
        ),
        (
            True,
            ("a", "b", "c"),
            {"b": True},
            ["a", "b", "c"],
            ResolvedScope(True, frozenset({"b"}), ("in namespace a", "in namespace c")),
        ),
        (
            True,
            ("a", "b"),
            {"": True},
            ["a", "b"],
            ResolvedScope(False, denied=("in namespace a", "in namespace b")),
        ),
        # Cluster-scoped types: one question, whatever watch-namespaces says.
        (False, ("a",), {"": True}, [""], ResolvedScope(True)),
        (False, None, {"home": True}, [""], ResolvedScope(False, denied=("(cluster-scoped)",))),
    ],
)
def test_access_is_asked_per_wanted_namespace_and_once_for_cluster_scoped_kinds(
    namespaced: bool,
    wanted: tuple[str, ...] | None,
    allowed: Mapping[str, bool],
    asked: list[str],
    scope: ResolvedScope,
) -> None:
    assert walk(namespaced, wanted, allowed) == (asked, scope)
