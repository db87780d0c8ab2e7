"""A start's reads of the shared watches' stores, shared: what a namespace's objects come to (a
census's tally, the newest change) is worked out once for every workload that reads it, and says
what reading the objects one by one for each workload would."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.test_census import _KINDS, WIDGET, _interests, _stored, obj, stored
from zeroscaler.cluster.informer import Store
from zeroscaler.controller import subscription
from zeroscaler.core.activity import Change, Interest, find_activity, scope_alone
from zeroscaler.core.census import (
    KindTally,
    combined,
    namespaces_to_read,
    newest_object,
    plain_tally,
    tally,
)
from zeroscaler.core.kinds import APIResource

_since = st.sampled_from(
    [None, datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC)]
)


def tally_in(store: Store, resource: APIResource, interest: Interest) -> KindTally:
    return subscription._tally_in(store, resource, interest)


@pytest.mark.parametrize("resource", _KINDS, ids=lambda r: r.kind)
@given(data=st.data(), objects=st.lists(_stored, max_size=8))
def test_a_census_from_namespaces_tallies_equals_one_object_by_object(
    resource: APIResource, data: st.DataObject, objects: list[Any]
) -> None:
    interest = data.draw(_interests(resource))
    store = Store(objects)
    where = namespaces_to_read(resource, interest)
    assert tally_in(store, resource, interest) == tally(
        store.in_namespaces(where), resource, interest
    )


@pytest.mark.parametrize("resource", _KINDS, ids=lambda r: r.kind)
@given(data=st.data(), objects=st.lists(_stored, max_size=8), since=_since)
def test_a_replay_from_namespaces_newest_finds_news_exactly_when_one_by_one_would(
    resource: APIResource, data: st.DataObject, objects: list[Any], since: datetime | None
) -> None:
    interest = dataclasses.replace(data.draw(_interests(resource)), since=since)
    store = Store(objects)
    where = namespaces_to_read(resource, interest)

    def news(found: list[Any]) -> list[Any]:
        changes = (Change("ADDED", o, initial=True) for o in found)
        return [a for c in changes if (a := find_activity(c, resource, interest)) is not None]

    one_by_one = news(list(store.in_namespaces(where)))
    shared = news(subscription._candidates(store, resource, interest))
    assert bool(shared) == bool(one_by_one)
    assert all(a in one_by_one for a in shared)  # it names an object one by one would name


def test_a_namespace_s_tally_is_the_sum_of_its_parts() -> None:
    objects = [stored(obj(f"o-{n}", str(n), ns)) for n, ns in enumerate(["ops", "dev"] * 3)]
    whole = plain_tally(objects, WIDGET)
    parts = [
        plain_tally([o for o in objects if o["namespace"] == ns], WIDGET) for ns in ("ops", "dev")
    ]
    assert combined(parts) == whole == KindTally(6, whole.digest)
    assert combined([]) == KindTally()


def test_the_newest_object_is_the_one_changed_last_by_someone_else() -> None:
    writes = [
        {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T10:00:00Z"},
        {"manager": "zeroscaler", "operation": "Update", "time": "2026-01-01T12:00:00Z"},
    ]
    early, late = stored(obj("a")), stored(obj("b", managedFields=writes[:1]))
    later_by_us = stored(obj("c", managedFields=[{**writes[0], "time": "2026-01-01T09:00:00Z"},
                                                 writes[1]]))  # fmt: skip
    assert newest_object([]) is None
    found = newest_object([early, later_by_us, late])
    assert found is not None
    assert found[0] == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert found[1]["name"] in {"a", "b"}  # both were written at 10:00 by kubectl


def test_a_store_keeps_what_it_worked_out_until_the_namespace_changes() -> None:
    store = Store([stored(obj("a")), stored(obj("b", namespace="dev"))])
    calls: list[str] = []

    def count(objects: Any) -> int:
        found = list(objects)
        calls.append(",".join(sorted(o["name"] for o in found)))
        return len(found)

    assert store.summary("ops", "n", count) == 1
    assert store.summary("ops", "n", count) == 1
    assert store.summary("dev", "n", count) == 1
    assert calls == ["a", "b"]
    store[("ops", "c")] = stored(obj("c"))  # ops changed; dev did not
    assert store.summary("ops", "n", count) == 2
    assert store.summary("dev", "n", count) == 1
    del store[("dev", "b")]
    assert store.summary("dev", "n", count) == 0
    assert store.summary("gone", "n", count) == 0
    assert calls == ["a", "b", "a,c", "", ""]


def test_workloads_sharing_a_namespace_tally_its_objects_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worked: list[int] = []

    def counted(objects: Any, resource: APIResource) -> KindTally:
        found = list(objects)
        worked.append(len(found))
        return plain_tally(found, resource)

    monkeypatch.setattr(subscription, "plain_tally", counted)
    store = Store([stored(obj(f"o-{n}", str(n))) for n in range(20)])
    interest = Interest(watched={("example.com", "Widget"): frozenset({"ops"})}, owned={})
    assert scope_alone(WIDGET, interest) == (True, frozenset({"ops"}))
    tallies = {tally_in(store, WIDGET, interest) for _ in range(10)}
    assert len(tallies) == 1
    assert worked == [20]  # ten workloads, one pass over the namespace
