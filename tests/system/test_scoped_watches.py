"""Shared watches that reach only as far as their workloads' scopes, on the real API server.

A sleeper that watches a kind in one namespace has it listed and watched there alone: the
objects of the namespaces nobody watches are never received. A second workload that watches
the kind everywhere widens the watch live to the whole cluster, and its removal narrows it back:
through both, a change in the sleeper's namespace wakes it once (none missed), and what the
wider list finds that was there all along wakes no one (no false activity).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_workload,
    events_of,
    grant_watch,
    wait_asleep,
    wait_woken,
)
from testkit.crds import create_crd
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster

GROUP = "zs-scoped.example.com"  # a kind of this test's own: no other test's objects in it
KIND, PLURAL = "Probe", "probes"
RESOURCE = f"{PLURAL}.{GROUP}"


@pytest.fixture
def places(api: k8s.ApiClient) -> Iterator[dict[str, str]]:
    """Three namespaces of the test's own: the sleeper's, another's, and one nobody watches."""
    suffix = secrets.token_hex(3)
    names = {role: f"scoped-{role}-{suffix}" for role in ("home", "other", "far")}
    core = k8s.CoreV1Api(api)
    for name in names.values():
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield names
    for name in names.values():
        core.delete_namespace(name)


def create_probe(api: k8s.ApiClient, ns: str, name: str) -> None:
    body: dict[str, Any] = {"apiVersion": f"{GROUP}/v1", "kind": KIND, "metadata": {"name": name}}
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, "v1", ns, PLURAL, body)


def woken_by(api: k8s.ApiClient, ref: Ref) -> list[str]:
    """The changes its Woken Events name, oldest first."""
    found = [e for e in events_of(api, ref) if e.reason == "Woken"]
    found.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [(e.message or "").split(":")[0] for e in found]


def watches(ctl: ControllerProcess) -> tuple[float, float]:
    """The controller's shared watches by scope: (in one namespace, cluster-wide)."""
    by_namespace = ctl.metric("zeroscaler_shared_watches", scope="namespace")
    return by_namespace, ctl.metric("zeroscaler_shared_watches", scope="cluster")


def test_a_scope_widens_and_narrows_live_without_a_missed_change_or_a_false_one(
    api: k8s.ApiClient,
    cluster: Cluster,
    opted_ns: str,
    controller: ControllerProcess,
    places: dict[str, str],
) -> None:
    with step("probes in three namespaces, and a sleeper watching one of them"):
        create_crd(api, GROUP, KIND, PLURAL)
        home, other, far = places["home"], places["other"], places["far"]
        for n in range(20):  # what the wider list finds there all along
            create_probe(api, far, f"old-{n}")
        for n in range(3):
            create_probe(api, home, f"old-{n}")
        grant_watch(api, opted_ns, [(GROUP, [PLURAL])], cluster_wide=True, name="scoped-watch")
        watched = f"{KIND}.{GROUP}"
        sleeper = create_workload(
            api, opted_ns, "sleeper", config_for("3s", watched, watch_namespaces=home)
        )

    with step("watched in its one namespace alone, a change elsewhere is never received"):
        # Watched in its one namespace alone: a change elsewhere is never even received.
        wait_asleep(api, sleeper, 3)
        assert watches(controller) == (1.0, 0.0)
        seen = controller.events_seen(RESOURCE)
        create_probe(api, far, "unseen")
        create_probe(api, home, "first")
        wait_woken(api, sleeper, f"{KIND} {home}/first created")
        assert (
            controller.events_seen(RESOURCE) == seen + 1
        )  # the change in home, not the one in far
        wait_asleep(api, sleeper, 3)

    with step("widened live: the sleeper woken once, nothing listed waking anyone"):
        # Widened live: a workload that watches the kind everywhere. A change in the sleeper's
        # namespace as the whole kind is listed wakes it once; the objects listed wake no one.
        activity = controller.metric("zeroscaler_activity_total")
        everywhere = create_workload(
            api, opted_ns, "everywhere", config_for("3s", watched, watch_namespaces="*")
        )
        wait_for(lambda: watches(controller)[1] == 1.0, "the kind watched cluster-wide")
        create_probe(api, home, "widening")
        wait_woken(api, sleeper, f"{KIND} {home}/widening created")
        wait_asleep(api, everywhere, 3)  # nothing it listed was activity: it fell asleep
        wait_asleep(api, sleeper, 3)
        wait_for(lambda: watches(controller) == (0.0, 1.0), "one cluster-wide watch alone")
        # The one change, for each of the two that watch where it was made.
        assert controller.metric("zeroscaler_activity_total") == activity + 2
        create_probe(api, other, "seen-now")
        wait_woken(api, everywhere, f"{KIND} {other}/seen-now created")
        assert woken_by(api, everywhere) == [f"{KIND} {other}/seen-now created"]

    with step(
        "narrowed live, a change meanwhile wakes the sleeper once, and far is no longer received"
    ):
        # Narrowed live: the everywhere workload goes. Its namespace's own watch lists, then takes
        # over; a change meanwhile wakes the sleeper once, and far is no longer received.
        k8s.AppsV1Api(api).delete_namespaced_deployment("everywhere", opted_ns)
        create_probe(api, home, "narrowing")
        wait_woken(api, sleeper, f"{KIND} {home}/narrowing created")
        wait_for(lambda: watches(controller) == (1.0, 0.0), "watched in one namespace again")
        wait_asleep(api, sleeper, 3)
        seen = controller.events_seen(RESOURCE)
        create_probe(api, far, "unseen-again")
        create_probe(api, home, "last")
        wait_woken(api, sleeper, f"{KIND} {home}/last created")
        assert controller.events_seen(RESOURCE) == seen + 1
        assert woken_by(api, sleeper) == [
            f"{KIND} {home}/{name} created" for name in ("first", "widening", "narrowing", "last")
        ]
