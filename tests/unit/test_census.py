"""The census a sleep records: it moves with every change that is activity, and with no other."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroscaler.cluster.informer import Store, key_of
from zeroscaler.core.activity import Interest, is_in_interest, shrink
from zeroscaler.core.census import (
    KindTally,
    difference,
    digest_text,
    fingerprint,
    format_census,
    namespaces_to_read,
    parse_census,
    tally,
)
from zeroscaler.core.kinds import APIResource

CONFIGMAP = APIResource("", "v1", "configmaps", "ConfigMap")
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", subresources=frozenset({"status"}))
DEPLOYMENT = APIResource(
    "apps", "v1", "deployments", "Deployment", subresources=frozenset({"status", "scale"})
)
SECRET = APIResource("", "v1", "secrets", "Secret")
INTEREST = Interest(
    watched={
        ("", "ConfigMap"): frozenset({"ops"}),
        ("example.com", "Widget"): frozenset({"ops"}),
        ("apps", "Deployment"): frozenset({"ops"}),
    },
    owned={("", "Secret"): frozenset({"ops"})},
    self_ref=("apps", "Deployment", "ops", "the-operator"),
)
CREATED = {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T10:00:00Z"}


def obj(name: str, rv: str = "1", namespace: str = "ops", **fields: Any) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": name, "resourceVersion": rv, "generation": 1}
    return {"metadata": {"managedFields": [CREATED], **meta, **fields}}


def entry(manager: str, time: str, subresource: str = "") -> dict[str, str]:
    found = {"manager": manager, "operation": "Update", "time": time}
    return {**found, "subresource": subresource} if subresource else found


def tally_of(resource: APIResource, *objects: dict[str, Any]) -> KindTally:
    return tally([shrink(o) for o in objects], resource, INTEREST)


SAME = "same"
# (id, resource, objects at sleep, objects at restart, "same" or the start of the reason)
CASES: list[tuple[str, APIResource, list[dict[str, Any]], list[dict[str, Any]], str]] = [
    ("nothing happened", CONFIGMAP, [obj("a"), obj("b")], [obj("b"), obj("a")], SAME),
    (
        "one deleted",
        CONFIGMAP,
        [obj("a"), obj("b")],
        [obj("a")],
        "1 ConfigMap object deleted while zeroscaler was not watching (2 in scope at sleep, 1 now)",
    ),
    ("all deleted", CONFIGMAP, [obj("a"), obj("b")], [], "2 ConfigMap objects deleted"),
    (
        "one deleted and another created: same count",
        CONFIGMAP,
        [obj("a"), obj("b")],
        [obj("a"), obj("c")],
        "ConfigMap objects changed while zeroscaler was not watching (2 in scope at sleep, 2 now)",
    ),
    (
        "updated in the second of the sleep (same managedFields time, new resourceVersion)",
        CONFIGMAP,
        [obj("a")],
        [obj("a", rv="2")],
        "ConfigMap objects changed",
    ),
    (
        "deleted out of scope",
        CONFIGMAP,
        [obj("a"), obj("x", namespace="elsewhere")],
        [obj("a")],
        SAME,
    ),
    (
        "a leader lock went away",
        CONFIGMAP,
        [obj("a"), obj("lock", annotations={"control-plane.alpha.kubernetes.io/leader": "{}"})],
        [obj("a")],
        SAME,
    ),
    (
        "status-only update",
        WIDGET,
        [obj("w")],
        [obj("w", rv="9", managedFields=[CREATED, entry("op", "2026-01-01T11:00:00Z", "status")])],
        SAME,
    ),
    ("spec changed in the same second", WIDGET, [obj("w")], [obj("w", generation=2)], "Widget"),
    (
        "labelled in the same second",
        WIDGET,
        [obj("w")],
        [obj("w", labels={"tier": "gold"})],
        "Widget",
    ),
    (
        "finalizer removed",
        WIDGET,
        [obj("w", finalizers=["example.com/x"])],
        [obj("w")],
        "Widget",
    ),
    (
        "a Deployment scaled and annotated by zeroscaler only",
        DEPLOYMENT,
        [obj("other", annotations={"zeroscaler.io/state": "awake"})],
        [
            obj(
                "other",
                rv="5",
                generation=2,
                annotations={"zeroscaler.io/state": "asleep", "zeroscaler.io/census": "x"},
                managedFields=[CREATED, entry("zeroscaler", "2026-01-01T11:00:00Z")],
            )
        ],
        SAME,
    ),
    (
        "a Deployment changed by someone else",
        DEPLOYMENT,
        [obj("other")],
        [obj("other", generation=2, managedFields=[entry("kubectl", "2026-01-01T11:00:00Z")])],
        "Deployment objects changed",
    ),
    (
        "the workload itself is not in its own census",
        DEPLOYMENT,
        [obj("other"), obj("the-operator")],
        [obj("other")],
        SAME,
    ),
    (
        "an owned object whose controller is of a watched kind, deleted",
        SECRET,
        [
            obj(
                "s",
                ownerReferences=[
                    {
                        "apiVersion": "example.com/v1",
                        "kind": "Widget",
                        "name": "w",
                        "controller": True,
                    }
                ],
            )
        ],
        [],
        "1 Secret object deleted",
    ),
    ("an owned object controlled by nothing we watch, deleted", SECRET, [obj("s")], [], SAME),
]


@pytest.mark.parametrize(
    ("resource", "before", "after", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_census_moves_with_activity_only(
    resource: APIResource,
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    expected: str,
) -> None:
    found = difference(resource.kind, tally_of(resource, *before), tally_of(resource, *after))
    if expected == SAME:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(expected)


@pytest.mark.parametrize("form", [shrink, lambda o: o], ids=["shrunk", "as listed"])
def test_fingerprint_reads_a_stored_object_as_the_listed_one(
    form: Callable[[dict[str, Any]], Any],
) -> None:
    listed = obj(
        "w", labels={"a": "b"}, managedFields=[CREATED, entry("op", "2026-01-01T11:00:00Z")]
    )
    assert fingerprint(form(listed)["metadata"], WIDGET) == fingerprint(listed["metadata"], WIDGET)


def test_census_annotation_round_trips_in_kind_order() -> None:
    census = {"Widget.example.com": KindTally(2, 0xABC), "ConfigMap": KindTally(0, 0)}
    text = format_census(census)
    assert text == "ConfigMap=0:0000000000000000, Widget.example.com=2:0000000000000abc"
    assert parse_census(text) == (census, [])


@pytest.mark.parametrize(
    "text", ["ConfigMap", "ConfigMap=2", "ConfigMap=two:0000000000000000", "=1:0000000000000000"]
)
def test_a_malformed_census_entry_is_left_out_and_named(text: str) -> None:
    census, problems = parse_census(f"{text}, Widget.example.com=1:00000000000000ff")
    assert census == {"Widget.example.com": KindTally(1, 255)}
    assert [str(p) for p in problems] == [
        f"zeroscaler.io/census: {text!r} is not of the form comma-separated "
        "Kind.group=count:16 hex digits (written by the controller)"
    ]


NAMESPACE = APIResource("", "v1", "namespaces", "Namespace", namespaced=False)
ELSEWHERE = Interest(  # scopes of every shape: a list, every namespace, an owned kind's own
    watched={("", "ConfigMap"): None, ("example.com", "Widget"): frozenset({"ops", "dev"})},
    owned={("", "Secret"): frozenset({"dev"})},
    namespaces=frozenset({"ops", "dev"}),
)


@pytest.mark.parametrize(
    ("resource", "interest", "expected"),
    [
        (CONFIGMAP, INTEREST, frozenset({"ops"})),
        (SECRET, INTEREST, frozenset({"ops"})),  # owned: its own scope
        (CONFIGMAP, ELSEWHERE, None),  # watched everywhere
        (WIDGET, ELSEWHERE, frozenset({"ops", "dev"})),
        (SECRET, ELSEWHERE, frozenset({"dev"})),
        (DEPLOYMENT, ELSEWHERE, frozenset()),  # neither watched nor owned
        (NAMESPACE, INTEREST, None),  # cluster-scoped: nothing to narrow by
    ],
)
def test_a_census_reads_only_the_namespaces_its_scope_covers(
    resource: APIResource, interest: Interest, expected: frozenset[str] | None
) -> None:
    assert namespaces_to_read(resource, interest) == expected


def stored(o: dict[str, Any]) -> dict[str, Any]:
    """An object as the shared watches keep it."""
    return cast(dict[str, Any], shrink(o))


OWNER = [{"apiVersion": "example.com/v1", "kind": "Widget", "controller": True, "name": "w"}]


@pytest.mark.parametrize("interest", [INTEREST, ELSEWHERE], ids=["ops", "ops and dev"])
@pytest.mark.parametrize(
    "resource", [CONFIGMAP, WIDGET, SECRET, DEPLOYMENT, NAMESPACE], ids=lambda r: r.kind
)
def test_a_census_of_its_namespaces_equals_one_of_the_whole_type(
    resource: APIResource, interest: Interest
) -> None:
    objects = [
        stored(obj(f"o-{n}", str(n), namespace, **({"ownerReferences": OWNER} if n % 2 else {})))
        for n, namespace in enumerate(["ops", "dev", "ci", "ops", "dev", "kube-system"] * 3)
    ]
    if not resource.namespaced:  # Namespaces, watched: ops, dev and ci themselves
        objects = [stored(obj(n, namespace="")) for n in ("ops", "dev", "ci")]
        interest = dataclasses.replace(
            interest, watched={**interest.watched, ("", "Namespace"): None}
        )
    store = Store(objects)
    whole = tally(store.values(), resource, interest)
    narrowed = tally(
        store.in_namespaces(namespaces_to_read(resource, interest)), resource, interest
    )
    assert narrowed == whole
    assert whole.count > 0 or resource is DEPLOYMENT  # each case has something to count


def test_a_store_finds_objects_by_key_and_by_namespace() -> None:
    store = Store([stored(obj("a")), stored(obj("b", namespace="dev")), stored(obj("c"))])
    store[("dev", "b")] = stored(obj("b", "2", namespace="dev"))  # replaced, not added
    assert len(store) == 3
    assert sorted(store) == [("dev", "b"), ("ops", "a"), ("ops", "c")]
    assert store[("dev", "b")]["metadata"]["resourceVersion"] == "2"
    assert sorted(o["metadata"]["name"] for o in store.in_namespaces(["ops", "gone"])) == ["a", "c"]
    assert store.pop(("dev", "b"), None) is not None
    assert store.pop(("dev", "b"), None) is None
    assert ("dev", "b") not in store
    assert len(store) == 2
    assert [k for k, _ in store.items()] == list(store)
    assert list(store.values()) == list(store.in_namespaces(None))


def test_a_store_files_kept_and_whole_objects_alike() -> None:
    whole = [obj("a"), obj("b", namespace="dev"), obj("n", namespace="")]
    kept, plain = Store([stored(o) for o in whole]), Store(whole)
    assert sorted(kept) == sorted(plain) == [("", "n"), ("dev", "b"), ("ops", "a")]
    assert len(kept) == len(plain) == 3
    assert [key_of(stored(o)) for o in whole] == [key_of(o) for o in whole]


def test_fingerprints_stay_as_earlier_versions_wrote_them() -> None:
    # Censuses written by an earlier version are compared after an upgrade: a digest that moved
    # with the code would wake every sleeper.
    meta = obj(
        "w",
        labels={"b": "2", "a": "1"},
        annotations={"note": "x", "zeroscaler.io/state": "asleep"},
        managedFields=[CREATED, entry("op", "2026-01-01T11:00:00Z")],
    )
    assert fingerprint(shrink(meta)["metadata"], WIDGET) == 0x80C19BAEDE52F7EF
    assert fingerprint(obj("c", resourceVersion="42")["metadata"], CONFIGMAP) == 0x44F47E4D12D0D412


NO_WRITES = {"namespace": "ops", "name": "n", "resourceVersion": "7", "generation": 3}


@pytest.mark.parametrize(
    ("meta", "resource", "pinned"),
    [
        (obj("p")["metadata"], WIDGET, 0xF3411AC198452E16),
        (obj("p")["metadata"], DEPLOYMENT, 0x6D86381EC68FB3D1),
        ({**NO_WRITES, "creationTimestamp": "2026-01-01T09:00:00Z"}, WIDGET, 0x9D1380F7B21DBBAC),
        (
            obj("s", managedFields=[CREATED, entry("op", "2026-01-01T11:00:00Z", "status")])[
                "metadata"
            ],
            WIDGET,
            0xA0B9809CBC653B46,
        ),
    ],
    ids=["one writer", "one writer, scaled kind", "no writes", "a status write"],
)
def test_fingerprints_without_the_rarer_fields_stay_as_earlier_versions_wrote_them(
    meta: dict[str, Any], resource: APIResource, pinned: int
) -> None:
    # Their text is written by a shorter path (most stored objects): pinned from the code before.
    assert fingerprint(shrink({"metadata": meta})["metadata"], resource) == pinned
    assert fingerprint(meta, resource) == pinned


_time = st.sampled_from(["2026-01-01T10:00:00Z", "2026-01-01T10:00:00.5Z", "later"])
_rarer = st.fixed_dictionaries(
    {},
    optional={
        "labels": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
        "annotations": st.dictionaries(
            st.sampled_from(["a", "zeroscaler.io/state"]), st.text(max_size=3), max_size=2
        ),
        "finalizers": st.lists(st.text(max_size=3), max_size=2),
        "deletionTimestamp": _time,
    },
)
_managers = st.sampled_from(["kubectl", "zeroscaler", "op"])
_subresources = st.sampled_from(["", "status", "scale"])
_writers = st.lists(st.builds(entry, _managers, _time, _subresources), max_size=3)


@given(_rarer, _writers, st.integers(0, 3), st.sampled_from([WIDGET, DEPLOYMENT, CONFIGMAP]))
def test_a_stored_object_and_the_listed_one_have_one_fingerprint(
    rarer: dict[str, Any], writers: list[dict[str, str]], generation: int, resource: APIResource
) -> None:
    meta = {**NO_WRITES, "generation": generation, **rarer}
    if writers:
        meta["managedFields"] = writers
    else:
        meta["creationTimestamp"] = "2026-01-01T09:00:00Z"
    assert fingerprint(shrink({"metadata": meta})["metadata"], resource) == fingerprint(
        meta, resource
    )


LEASE = APIResource("coordination.k8s.io", "v1", "leases", "Lease")
_KINDS = [CONFIGMAP, WIDGET, DEPLOYMENT, SECRET, LEASE, NAMESPACE]
_PLACES = ["ops", "dev", "ci"]
_scope = st.one_of(st.none(), st.frozensets(st.sampled_from(_PLACES)))
_group_kinds = st.sampled_from([(r.group, r.kind) for r in _KINDS])
_names = st.frozensets(st.sampled_from(["a", "b"]))


@st.composite
def _interests(draw: st.DrawFn, resource: APIResource) -> Interest:
    """An interest of any shape, most of them in `resource`: every rule it has a say in."""
    own = (resource.group, resource.kind)
    watched = draw(st.dictionaries(_group_kinds, _scope, max_size=3))
    if draw(st.integers(0, 3)):  # mostly watched, else perhaps owned or neither
        watched[own] = draw(_scope)
    self_ref = draw(st.sampled_from([("", "", "", ""), (*own, "ops", "a"), INTEREST.self_ref]))
    return Interest(
        watched=watched,
        owned=draw(st.dictionaries(_group_kinds, _scope, max_size=2)),
        self_ref=self_ref,
        names=draw(st.one_of(st.just({}), st.builds(lambda n: {own: n}, _names))),
        namespaces=draw(st.one_of(st.none(), st.frozensets(st.sampled_from(_PLACES)))),
    )


_stored = st.builds(
    lambda name, namespace, rarer, writers, owned: shrink(
        {
            "metadata": {
                **NO_WRITES,
                "name": name,
                "namespace": namespace,
                **rarer,
                **({"ownerReferences": OWNER} if owned else {}),
                **({"managedFields": writers} if writers else {}),
            }
        }
    ),
    st.sampled_from(["a", "b", "ops"]),
    st.sampled_from([*_PLACES, ""]),
    _rarer,
    _writers,
    st.booleans(),
)


@pytest.mark.parametrize("resource", _KINDS, ids=lambda r: r.kind)
@given(data=st.data(), objects=st.lists(_stored, max_size=6))
def test_a_census_counts_and_digests_what_is_in_interest_whatever_the_interest(
    resource: APIResource, data: st.DataObject, objects: list[Any]
) -> None:
    interest = data.draw(_interests(resource))
    # The census decides by namespace alone where nothing else can count: it must agree with
    # the rule it stands in for, object by object.
    counted = [o for o in objects if is_in_interest(o["metadata"], resource, interest)]
    digest = sum(fingerprint(o["metadata"], resource) for o in counted) % 2**64
    assert tally(objects, resource, interest) == KindTally(len(counted), digest)


_text = st.text(max_size=8)
_parts = st.lists(
    st.one_of(
        _text,
        st.integers(),
        st.booleans(),
        st.floats(allow_nan=False),
        st.none(),
        st.dictionaries(_text, st.one_of(_text, st.integers()), max_size=3),
        st.lists(
            st.one_of(
                _text,
                st.tuples(_text, _text, _text),
                # Not all strings: the encoder's own text, not the direct one.
                st.tuples(_text, st.one_of(st.integers(), st.none(), st.tuples(_text))),
                st.dictionaries(_text, _text),
            ),
            max_size=3,
        ),
    ),
    max_size=9,
)


@given(_parts)
def test_the_digest_text_is_the_encoders_whatever_the_parts(parts: list[Any]) -> None:
    assert digest_text(parts) == json.dumps(
        parts, sort_keys=True, separators=(",", ":"), default=str
    )
