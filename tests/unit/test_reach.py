"""How far each shared watch reaches, and a namespace's handover from one watch to another."""

from __future__ import annotations

from typing import Any

import pytest

from zeroscaler.core.reach import Handover, differences, handover, plan, version_order


@pytest.mark.parametrize(
    ("sizes", "budget", "most", "narrow"),
    [
        ({"a": 3, "b": 2}, 100, None, {"a", "b"}),  # all fit
        ({"a": 3, "b": None}, 100, None, {"a"}),  # b is wanted everywhere
        # 3 types cost 3; a and b by namespace cost 2 and 1 more: 6 fits, 5 leaves a out.
        ({"a": 3, "b": 2, "c": None}, 6, None, {"a", "b"}),
        ({"a": 3, "b": 2, "c": None}, 5, None, {"b"}),
        ({"a": 3, "b": 2, "c": None}, 3, None, set()),
        ({"a": 2, "b": 2, "c": 2}, 5, None, {"a", "b"}),  # ties: in key order
        ({"a": 0, "b": 1}, 2, None, {"a", "b"}),  # no namespace, or one: no more than one
        # Wanted in most of the cluster's namespaces: cluster-wide whatever the budget.
        ({"a": 150, "b": 20}, 10_000, 100, {"b"}),
        ({"a": 100}, 10_000, 100, {"a"}),
    ],
)
def test_types_are_watched_by_namespace_fewest_first_within_the_budget(
    sizes: dict[str, int | None], budget: int, most: int | None, narrow: set[str]
) -> None:
    assert plan(sizes, budget, most) == narrow


def test_a_plan_with_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget: -1"):
        plan({"a": 1}, -1)


@pytest.mark.parametrize(
    ("version", "order"),
    [("12345", 12345), (12345, 12345), ("0", 0), ("012", None), ("abc", None), ("", None)],
)
def test_a_resource_version_is_ordered_only_when_it_is_a_number(
    version: object, order: int | None
) -> None:
    assert version_order(version) == order


def obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ops", "resourceVersion": version}}


OLD = {"a": obj("a", "10"), "b": obj("b", "11"), "c": obj("c", "12")}
# Between the old watch's last event (12) and the new list (20): a changed, c deleted, d made.
NEW = {"a": obj("a", "15"), "b": obj("b", "11"), "d": obj("d", "18")}


def test_a_new_watch_that_listed_later_tells_only_what_changed_since_the_old_one() -> None:
    moved = handover("12", OLD, "20", NEW)
    assert moved.skip_through is None
    assert sorted((kind, o["metadata"]["name"]) for kind, o, _ in moved.changes) == [
        ("ADDED", "d"),
        ("DELETED", "c"),
        ("MODIFIED", "a"),
    ]
    modified = next(c for c in moved.changes if c[0] == "MODIFIED")
    assert modified[2] == OLD["a"]  # told with what it was, as a watch tells it
    # b was there all along and unchanged: never told, as a list's objects are not news.


def test_an_old_watch_that_saw_further_has_the_new_one_skip_what_it_told() -> None:
    # The old watch had told everything through 25; the new list is of 20: the new watch's
    # events through 25 were told already, and nothing is told now.
    assert handover("25", NEW, "20", OLD) == Handover(skip_through=25)
    assert handover("20", NEW, "20", NEW) == Handover(skip_through=20)


def test_versions_that_cannot_be_ordered_are_compared_object_by_object() -> None:
    moved = handover("x", OLD, "y", NEW)
    assert moved.skip_through is None
    assert len(moved.changes) == 3
    assert handover("x", OLD, "y", OLD) == Handover()


def test_differences_between_two_holdings_of_a_namespace() -> None:
    assert list(differences({}, {})) == []
    assert list(differences(OLD, OLD)) == []
    assert [(k, o["metadata"]["name"]) for k, o, _ in differences({}, {"a": obj("a", "1")})] == [
        ("ADDED", "a")
    ]
