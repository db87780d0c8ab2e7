"""Windows on the real control plane: the controller as a real process whose clock is moved to a
Monday just before 09:00 in Berlin (testkit/programs/clock_shift.py), living through a one-minute
keep-awake window and a one-minute forced-sleep window that holds activity."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    Ref,
    config_for,
    create_configmap,
    create_workload,
    events_of,
    grant_watch,
    start_controller,
    state_of,
    wait_asleep,
    wait_awake,
    wait_event,
)
from testkit.steps import step
from testkit.waiting import wait_for
from tests.system.test_serving import conversion_crd, create_service
from zeroscaler.core.durations import parse_time

pytestmark = pytest.mark.cluster

# Monday 2026-01-05, 08:59:25 in Berlin (UTC+1): the controller starts 35 s before 09:00.
START = "2026-01-05T07:59:25Z"
OPENS = parse_time("2026-01-05T08:00:00Z")  # 09:00 in Berlin
CLOSES = parse_time("2026-01-05T08:01:00Z")  # 09:01
WINDOW = "Mon 09:00-09:01 Europe/Berlin"


def recorded(api: k8s.ApiClient, ref: Ref, key: str) -> datetime:
    """A time the controller wrote (its own clock's)."""
    return parse_time(state_of(api, ref)[1][f"zeroscaler.io/{key}"])


def sleeps_of(api: k8s.ApiClient, ref: Ref) -> list[str]:
    return [e.message for e in events_of(api, ref) if e.reason == "Sleeping"]


def test_windows_on_a_moved_clock(
    api: k8s.ApiClient, opted_ns: str, cluster: Cluster, tmp_path: Path, widgets: None
) -> None:
    with step(
        "workloads under a keep-awake window, a forced-sleep window, a misspelt one and a backend"
    ):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ns = opted_ns
        # A keep-awake window over a workload that sleeps after 2 s idle.
        sleeper = create_workload(
            api,
            ns,
            "sleeper",
            config_for("2s", "ConfigMap", watch_namespaces=ns, keep_awake=WINDOW),
            replicas=2,
            paused=True,
        )
        # A forced-sleep window that holds activity, over one that would stay up an hour.
        nightly = create_workload(
            api,
            ns,
            "nightly",
            config_for("1h", "ConfigMap", watch_namespaces=ns, forced_sleep=WINDOW + " hold"),
            replicas=2,
            paused=True,
        )
        # The same window misspelt: said once, nothing else changes.
        typo = create_workload(
            api,
            ns,
            "typo",
            config_for(
                "1h", "ConfigMap", watch_namespaces=ns, forced_sleep="Mon 09:00-09:01 Berlin"
            ),
            paused=True,
        )
        # A forced-sleep window over one that backs a CRD's conversion: safety wins.
        create_service(api, ns, "converter", {"app": "converter"})
        converter = create_workload(
            api,
            ns,
            "converter",
            config_for("1h", "ConfigMap", watch_namespaces=ns, forced_sleep=WINDOW),
            paused=True,
        )
        crd_name = f"gizmos.{ns}.zs-serving.example.com"
        ext = k8s.ApiextensionsV1Api(api)
        ext.create_custom_resource_definition(conversion_crd(crd_name, "gizmos", ns, "converter"))
    with step("a controller whose clock reads Monday just before 09:00 in Berlin"):
        ctl = start_controller(
            cluster, ns, tmp_path, clock_at=START, extra=["--keep-awake-jitter", "0"]
        )
    try:
        with step("before 09:00: the sleeper sleeps when idle, the typo and the backend are said"):
            # Before 09:00: the sleeper sleeps when idle, as ever.
            wait_asleep(api, sleeper, 2)
            assert recorded(api, sleeper, "asleep-since") < OPENS
            wait_event(api, typo, "InvalidAnnotation", "zeroscaler.io/forced-sleep")
            wait_event(api, converter, "BacksAPI", crd_name)

        with step(
            "09:00: the keep-awake window wakes the sleeper, the forced-sleep one sleeps the other"
        ):
            # 09:00: the keep-awake window wakes the sleeper at its start...
            wait_event(api, sleeper, "Woken", f'keep-awake window "{WINDOW}"')
            wait_awake(api, sleeper, 2)
            assert recorded(api, sleeper, "last-activity") >= OPENS
            # ...and the forced-sleep window puts the other to sleep, idle or not.
            wait_asleep(api, nightly, 2)
            assert recorded(api, nightly, "asleep-since") >= OPENS
            assert f'forced-sleep window "{WINDOW} hold"' in sleeps_of(api, nightly)[0]
            asleep = k8s.AppsV1Api(api).list_namespaced_deployment(
                ns, label_selector="zeroscaler.io/state=asleep"
            )
            assert [d.metadata.name for d in asleep.items] == ["nightly"]
            # One that backs a conversion is not forced to sleep, and the Event says which won.
            wait_event(api, converter, "ForcedSleepOverridden", "safety comes first")

        with step("inside the window, a watched change is held, not lost"):
            # Inside the window a watched change is held, not lost.
            create_configmap(api, ns, "settings")
            wait_event(api, nightly, "WakeHeld", f"ConfigMap {ns}/settings")
            replicas, annotations = state_of(api, nightly)
            assert (replicas, annotations["zeroscaler.io/state"]) == (0, "asleep")

        with step("09:01: the held change wakes it"):
            # 09:01: the held change wakes it, named in the Event...
            woken = wait_event(api, nightly, "Woken", f"ConfigMap {ns}/settings", timeout=120)
            assert "scaled from 0 to 2 replicas" in woken.message
            wait_awake(api, nightly, 2)
            assert recorded(api, nightly, "last-activity") >= CLOSES
        with step("the sleeper sleeps again only once the window is over"):
            # ...and the sleeper, idle all through the window, sleeps only once it is over.
            wait_for(
                lambda: len(sleeps_of(api, sleeper)) == 2,
                "the sleeper asleep again after the window",
                timeout=120,
            )
            wait_asleep(api, sleeper, 2)
            assert recorded(api, sleeper, "asleep-since") >= CLOSES

        with step("the misspelt window and the backend changed nothing"):
            # The misspelt window and the backend changed nothing.
            for ref in (typo, converter):
                assert state_of(api, ref)[0] == 3
                assert sleeps_of(api, ref) == []
    finally:
        ext.delete_custom_resource_definition(crd_name)
        ctl.stop()
        print(ctl.log_tail(120))
