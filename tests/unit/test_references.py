"""Table tests of the shared parsing the webhook relies on: durations, kind references."""

from __future__ import annotations

import pytest

from testkit.discovery import builtin_resources, crd_resource
from zeroscaler.core.annotations import read_config
from zeroscaler.core.durations import DurationError, format_duration, parse_duration
from zeroscaler.core.kinds import (
    APIResource,
    Discovery,
    KindRef,
    KindRefError,
    api_resource_from_crd,
    parse_kind_ref,
    parse_kind_refs,
)

DISCOVERY = Discovery(
    [
        *builtin_resources(),
        crd_resource("install.istio.io", "IstioOperator", "istiooperators"),
        crd_resource("acid.zalan.do", "postgresql", "postgresqls"),
        crd_resource("redis.redis.opstreelabs.in", "Redis", "redis"),
    ]
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("1h30m", 5400),
        ("2h0m5s", 7205),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("600", 600),
        (" 10m ", 600),
        ("0s", 0),
    ],
)
def test_durations_parse_in_go_units_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "ten minutes", "10 m", "m", "1d", "-5m", "5m-", "1h" * 40, "inf"]
)
def test_anything_else_is_refused_as_not_a_duration(text: str) -> None:
    with pytest.raises(DurationError, match="is not a duration such as 90s, 15m, 1h30m"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (90, "1m30s"), (900, "15m"), (5400, "1h30m"), (86400, "24h")]
)
def test_durations_are_written_in_the_largest_whole_units(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("ConfigMap", KindRef("ConfigMap", kind="ConfigMap")),
        ("Deployment.apps", KindRef("Deployment.apps", kind="Deployment", group="apps")),
        (
            "IstioOperator.v1alpha1.install.istio.io",
            KindRef(
                "IstioOperator.v1alpha1.install.istio.io",
                kind="IstioOperator",
                group="install.istio.io",
                version="v1alpha1",
            ),
        ),
        (
            "istiooperators.install.istio.io",
            KindRef(
                "istiooperators.install.istio.io",
                resource="istiooperators",
                group="install.istio.io",
            ),
        ),
        ("configmaps", KindRef("configmaps", resource="configmaps")),
    ],
)
def test_kind_references_parse_as_kind_group_version_or_resource(text: str, ref: KindRef) -> None:
    assert parse_kind_ref(text) == ref


@pytest.mark.parametrize("text", ["", "Foo..bar", ".apps", "Deploy ment", "a/b", "-x"])
def test_malformed_kind_references_are_refused(text: str) -> None:
    with pytest.raises(KindRefError, match="is not a kind reference"):
        parse_kind_ref(text)


def test_parse_kind_refs_keeps_the_good_ones() -> None:
    refs, errors = parse_kind_refs("ConfigMap, ,Foo..bar, Deployment.apps")
    assert [r.text for r in refs] == ["ConfigMap", "Deployment.apps"]
    assert len(errors) == 1
    assert "'Foo..bar' is not a kind reference" in errors[0]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("ConfigMap", "ConfigMap"),
        ("configmaps", "ConfigMap"),
        ("configmap", "ConfigMap"),
        ("Event", "Event"),  # the core group is preferred for a bare name
        ("Event.events.k8s.io", "Event.events.k8s.io"),
        ("events.events.k8s.io", "Event.events.k8s.io"),
        ("Deployment.v1.apps", "Deployment.apps"),
        ("IstioOperator.v1alpha1.install.istio.io", "IstioOperator.install.istio.io"),
        ("istiooperators.install.istio.io", "IstioOperator.install.istio.io"),
        ("postgresql.acid.zalan.do", "postgresql.acid.zalan.do"),  # a lower-case Kind
        ("redis.redis.redis.opstreelabs.in", "Redis.redis.redis.opstreelabs.in"),
        ("Redis", "Redis.redis.redis.opstreelabs.in"),
    ],
)
def test_short_and_plural_references_resolve_to_the_served_kind(text: str, canonical: str) -> None:
    api = DISCOVERY.resolve(parse_kind_ref(text))
    assert api is not None
    assert api.canonical == canonical


@pytest.mark.parametrize("text", ["Widget", "Deployment.extensions", "gateways.istio.io"])
def test_unserved_references_do_not_resolve(text: str) -> None:
    assert DISCOVERY.resolve(parse_kind_ref(text)) is None


@pytest.mark.parametrize(
    ("annotations", "timeout", "watched", "problem"),
    [
        ({"zeroscaler.io/idle-timeout": "10m"}, 600, (), None),
        ({"controller-zero-scaler/idleTimeout": "300"}, 300, (), None),
        ({"controller-zero-scaler/zeroScaleTimeout": "2m"}, 120, (), None),
        (
            {
                "controller-zero-scaler/watchedKinds": (
                    '[{"apiVersion": "apps/v1", "Kind": "Deployment"}]'
                )
            },
            None,
            ("Deployment.v1.apps",),
            None,
        ),
        ({"zeroscaler.io/idle-timeout": "0s"}, None, (), "must be longer than zero"),
        ({"zeroscaler.io/watched-kinds": "ConfigMap,,Foo..x"}, None, ("ConfigMap",), "Foo..x"),
        ({"controller-zero-scaler/watchedKinds": "{"}, None, (), "is not JSON (use [{"),
    ],
)
def test_workload_annotations_are_read_and_each_problem_is_named(
    annotations: dict[str, str],
    timeout: float | None,
    watched: tuple[str, ...],
    problem: str | None,
) -> None:
    config, problems = read_config(annotations)
    assert config.idle_timeout == timeout
    assert tuple(str(r) for r in config.watched) == watched
    if problem is None:
        assert problems == []
    else:
        assert any(problem in str(p) for p in problems), problems


def _crd(scope: str = "Namespaced", **version: object) -> dict[str, object]:
    return {
        "metadata": {"name": "widgets.demo.example.com"},
        "spec": {
            "group": "demo.example.com",
            "scope": scope,
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                      "shortNames": ["wd"]},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False},
                {"name": "v1", "served": True, "storage": True, **version},
            ],
        },
    }  # fmt: skip


def test_a_crd_defines_the_type_discovery_will_serve() -> None:
    widget = api_resource_from_crd(_crd(subresources={"status": {}}))
    assert widget is not None
    assert (widget.group, widget.version, widget.resource, widget.kind) == (
        "demo.example.com", "v1", "widgets", "Widget")  # fmt: skip
    assert widget.namespaced
    assert widget.has_status
    assert "watch" in widget.verbs
    assert widget.canonical == "Widget.demo.example.com"
    assert api_resource_from_crd(_crd(scope="Cluster")).namespaced is False  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "crd",
    [
        {},
        {"spec": "nonsense"},
        {"spec": {"group": "g.example.com", "names": {"kind": "Widget"}, "versions": []}},
        {"spec": {"group": "g.example.com", "names": {"kind": "W", "plural": "ws"},
                  "versions": [{"name": "v1", "served": False, "storage": True}]}},
    ],
)  # fmt: skip
def test_a_crd_without_a_served_type_defines_nothing(crd: dict[str, object]) -> None:
    assert api_resource_from_crd(crd) is None


def test_discovery_merged_with_pending_crds_resolves_them_and_keeps_served_ones() -> None:
    served = APIResource("demo.example.com", "v2", "widgets", "Widget")
    pending = api_resource_from_crd(_crd())
    assert pending is not None
    gadget = APIResource("other.example.com", "v1", "gadgets", "Gadget")
    merged = Discovery([served]).merged_with([pending, gadget])
    assert merged.resolve(parse_kind_ref("Widget.demo.example.com")) == served
    assert merged.resolve(parse_kind_ref("gadgets.other.example.com")) == gadget
    assert Discovery([served]).merged_with([pending]).resources == [served]
