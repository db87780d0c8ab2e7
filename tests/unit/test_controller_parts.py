"""Small controller parts that need no cluster: settings, log lines, workload trimming, the
Lease at shutdown."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic_settings import CliApp

from tests.unit.mock_api import kube_served_by
from zeroscaler.controller.flags import parse_settings
from zeroscaler.controller.leader import LeaderElector, LeaseTerms
from zeroscaler.controller.workload import Workload
from zeroscaler.controller.workload_object import WorkloadObject, trim_workload
from zeroscaler.core.managers import ARGO_CD, Manager
from zeroscaler.runtime.clock import ManualClock
from zeroscaler.runtime.logs import JsonFormatter, LogfmtFormatter
from zeroscaler.webhook.settings import WebhookSettings


def test_flags_override_defaults() -> None:
    settings = parse_settings(
        [
            "--kubeconfig",
            "/k",
            "--dry-run",
            "--metrics-port",
            "0",
            "--id",
            "a",
            "--log-level",
            "debug",
        ]
    )
    assert (settings.kubeconfig, settings.dry_run, settings.metrics_port) == ("/k", True, 0)
    assert (settings.id, settings.log_level, settings.lease_namespace) == (
        "a",
        "debug",
        "zeroscaler",
    )


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {"POD_NAME": "zeroscaler-controller-7d9f-x2k4q"}, "zeroscaler-controller-7d9f-x2k4q"),
        ([], {"POD_NAME": "pod-a", "ZEROSCALER_ID": "set"}, "set"),
        (["--id", "flag"], {"POD_NAME": "pod-a"}, "flag"),
    ],
)
def test_identity_defaults_to_the_pod_name(
    argv: list[str], environ: dict[str, str], expected: str
) -> None:
    assert parse_settings(argv, environ).id == expected


def test_identity_without_a_pod_name_differs_per_process() -> None:
    assert parse_settings([], {}).id.endswith(f"-{os.getpid()}")


def test_settings_are_read_from_zeroscaler_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ZEROSCALER_LEASE_NAMESPACE", "ops")
    assert parse_settings([]).lease_namespace == "ops"


def test_environment_values_are_typed_and_flags_win() -> None:
    env = {
        "ZEROSCALER_DRY_RUN": "true",
        "ZEROSCALER_WORKERS": "8",
        "ZEROSCALER_LEASE_DURATION": "4.5",
    }
    settings = parse_settings(["--workers", "9"], env)
    assert (settings.dry_run, settings.workers, settings.lease_duration) == (True, 9, 4.5)
    assert parse_settings([], {"ZEROSCALER_DRY_RUN": "off"}).dry_run is False


def test_access_from_rbac_is_on_unless_turned_off() -> None:
    assert parse_settings([], {}).access_from_rbac is True
    assert parse_settings(["--no-access-from-rbac"], {}).access_from_rbac is False
    assert parse_settings([], {"ZEROSCALER_ACCESS_FROM_RBAC": "false"}).access_from_rbac is False
    env = {"ZEROSCALER_ACCESS_FROM_RBAC": "false"}
    assert parse_settings(["--access-from-rbac"], env).access_from_rbac is True


def test_a_flag_wins_over_a_service_link_variable_it_never_reads() -> None:
    # What Kubernetes sets in every pod of the namespace for a Service named zeroscaler-metrics.
    env = {"ZEROSCALER_METRICS_PORT": "tcp://10.96.0.7:8080"}
    assert parse_settings(["--metrics-port", "9090"], env).metrics_port == 9090


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        ([], {"ZEROSCALER_WORKERS": "many"}, "ZEROSCALER_WORKERS='many'"),
        ([], {"ZEROSCALER_DRY_RUN": "maybe"}, "expected true or false"),
        (["--metrics-port", "70000"], {}, "metrics_port must be in [0, 65535]"),
        ([], {"ZEROSCALER_LOG_LEVEL": "loud"}, "log_level must be one of"),
        (["--lease-duration", "0"], {}, "must be positive"),
    ],
)
def test_bad_settings_stop_with_a_message_naming_them(
    argv: list[str], env: dict[str, str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_settings(argv, env)
    assert stopped.value.code == 2
    assert named in capsys.readouterr().err


def test_log_lines_are_logfmt_with_extra_fields() -> None:
    record = logging.makeLogRecord(
        {"name": "controller", "levelname": "INFO", "msg": "woken", "workload": "Deployment/a b"}
    )
    line = LogfmtFormatter().format(record)
    assert (
        line.split(" ", 1)[1] == 'level=info logger=controller msg=woken workload="Deployment/a b"'
    )


def test_json_log_lines_carry_the_same_fields() -> None:
    record = logging.makeLogRecord(
        {"name": "webhook", "levelname": "WARNING", "msg": "a %s", "args": ("b",), "n": 3}
    )
    fields = json.loads(JsonFormatter().format(record))
    assert fields.pop("time").endswith("Z")
    assert fields == {"level": "warning", "logger": "webhook", "msg": "a b", "n": 3}


def test_the_log_format_is_a_setting_of_both_components() -> None:
    assert parse_settings(["--log-format=json"], {}).log_format == "json"
    assert parse_settings([], {"ZEROSCALER_LOG_FORMAT": "json"}).log_format == "json"
    assert parse_settings([], {}).log_format == "text"
    assert CliApp.run(WebhookSettings, cli_args=["--log-format=json"]).log_format == "json"
    with pytest.raises(ValueError, match="log_format"):
        WebhookSettings.model_validate({"log_format": "yaml"})


def test_trim_workload_keeps_what_the_scaler_reads() -> None:
    from zeroscaler.core.savings import Requests

    obj = {
        "metadata": {
            "name": "op",
            "namespace": "ops",
            "uid": "u",
            "resourceVersion": "5",
            "generation": 4,
            "annotations": {
                "zeroscaler.io/idle-timeout": "5m",
                "controller-zero-scaler/watchedKinds": "Backup",
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            },
            "labels": {"app": "op"},
            "managedFields": [
                {
                    "manager": "argocd-controller",
                    "time": "2026-01-01T10:00:00Z",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}},
                }
            ],
        },
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "op-pod"}},
                "spec": {
                    "serviceAccount": "legacy",
                    "containers": [
                        {"name": "m", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                        {"name": "s", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                    ],
                },
            },
        },
        "status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 4},
    }
    assert trim_workload(obj) == WorkloadObject(
        name="op",
        namespace="ops",
        uid="u",
        resource_version="5",
        generation=4,
        # Only what zeroscaler reads: last-applied-configuration alone can be kilobytes.
        annotations={
            "zeroscaler.io/idle-timeout": "5m",
            "controller-zero-scaler/watchedKinds": "Backup",
        },
        labels={"app": "op"},
        replicas=3,
        service_account="legacy",
        pod_labels={"app": "op-pod"},
        rollout_paused=False,
        # What each pod requests, the limit standing for a request left out.
        pod_requests=Requests(1.25, 64 * 2**20 + 2**30),
        has_status=True,
        observed_generation=4,
        ready_replicas=2,
        replicas_manager="argocd-controller",
        applied=False,  # no manager of it writes by server-side apply
        # The managers above it, read from its labels, annotations and field managers.
        managers=(Manager(ARGO_CD),),
    )
    # Pod labels equal to the workload's own are one dict, not two.
    template = {"metadata": {"labels": {"app": "op"}}, "spec": {}}
    again = trim_workload({**obj, "spec": {"replicas": 1, "template": template}})
    assert again.pod_labels is again.labels


def test_a_trimmed_workload_is_ready_as_its_status_and_spec_say() -> None:
    def ready(spec: dict[str, Any], status: dict[str, Any] | None) -> bool | None:
        obj: dict[str, Any] = {"metadata": {"name": "op", "generation": 2}, "spec": spec}
        if status is not None:
            obj["status"] = status
        return trim_workload(obj).is_ready()

    assert ready({"replicas": 2}, {"readyReplicas": 2, "observedGeneration": 2}) is True
    assert ready({"replicas": 2}, {"readyReplicas": 2, "observedGeneration": 1}) is False
    assert ready({"replicas": 2}, {"readyReplicas": 1}) is False
    assert ready({"replicas": 2}, None) is False  # no pods reported yet
    assert ready({"replicas": 0}, {"replicas": 0}) is True  # a status with nothing to wait for
    assert ready({"replicas": 2, "paused": True}, None) is None  # a paused rollout makes no pods
    assert ready({}, None) is False  # one replica when none is set


def test_a_workload_keeps_the_copy_it_holds_over_an_answer_no_newer() -> None:
    def version(rv: str, state: str) -> WorkloadObject:
        annotations = {"zeroscaler.io/state": state}
        meta = {"name": "op", "resourceVersion": rv, "annotations": annotations}
        return trim_workload({"metadata": meta})

    watched = version("10", "asleep")  # the watch brought the sleep's own version first
    w = Workload(("Deployment", "ops", "op"), watched, datetime(2026, 1, 1, tzinfo=UTC))
    w.take(version("10", "asleep"))  # then the write's answer, an equal copy
    w.take(version("9", "awake"))  # and an older answer, late
    assert w.obj is watched
    assert w.status.state == "asleep"
    newer = version("11", "awake")
    w.take(newer)
    assert (w.obj is newer, w.status.state) == (True, "awake")
    unnumbered = version("", "asleep")  # versions that cannot be compared: the answer wins
    w.take(unnumbered)
    assert (w.obj is unnumbered, w.status.state) == (True, "asleep")


TERMS = LeaseTerms("zs", "lease", "ctl-a", 3.0)


async def test_the_lease_is_freed_only_after_the_writes_on_their_way() -> None:
    """At shutdown no new write starts, those on their way land, and only then does the Lease go:
    a standby taking over at once never writes beside them."""
    order: list[str] = []
    lease = {
        "metadata": {"resourceVersion": "7"},
        "spec": {"holderIdentity": "ctl-a", "leaseDurationSeconds": 3},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        order.append(f"{request.method} lease")
        return httpx.Response(200, json=lease)

    kube = kube_served_by(handler)
    elector = LeaderElector(
        kube, TERMS, ManualClock(), lambda held: order.append(f"leading={held}")
    )
    elector.is_leader = True

    async def drain() -> None:
        order.append("drained")

    await elector.release(drain)
    assert order == ["leading=False", "drained", "leading=False", "GET lease", "PATCH lease"]
    assert not elector.is_leader


async def test_a_holder_renews_over_its_own_write_and_reads_the_lease_after_another() -> None:
    """One request a renewal while nobody else writes the Lease; a write by anyone else fails
    the renewal's precondition, and the Lease is read before it is renewed again."""
    seen: list[str] = []
    version = 1

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal version
        body = json.loads(request.content) if request.content else {}
        expected = (body.get("metadata") or {}).get("resourceVersion")
        seen.append(f"{request.method} {expected or ''}".strip())
        if expected is not None and expected != str(version):
            return httpx.Response(409, json={"kind": "Status", "code": 409})
        if request.method == "PATCH":
            version += 1
        lease = {
            "metadata": {"resourceVersion": str(version)},
            "spec": {"holderIdentity": "ctl-a", "leaseDurationSeconds": 3},
        }
        return httpx.Response(200, json=lease)

    clock = ManualClock()
    elector = LeaderElector(kube_served_by(handler), TERMS, clock, lambda _: None)
    assert await elector._attempt()  # one attempt at a time, without the sleeps
    elector.is_leader = True
    for _ in range(2):
        clock.advance(1)
        assert await elector._attempt()
    version += 1  # someone else wrote the Lease (its holder still ctl-a)
    clock.advance(1)
    assert await elector._attempt()
    assert seen == ["GET", "PATCH 1", "PATCH 2", "PATCH 3", "PATCH 4", "GET", "PATCH 5"]


def _lease_answers(
    holder: str, written: list[dict[str, Any]]
) -> Callable[[httpx.Request], httpx.Response]:
    """A Lease held by `holder`, renewed at a fixed time; every write's body is kept in `written`
    and answered as accepted."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            lease = {
                "metadata": {"resourceVersion": "1"},
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": 3,
                    "renewTime": "2026-01-01T11:00:00.000000Z",
                },
            }
            return httpx.Response(200, json=lease)
        written.append(json.loads(request.content))
        return httpx.Response(200, json={"metadata": {"resourceVersion": str(len(written) + 1)}})

    return handler


async def test_the_lease_times_written_are_the_clocks_it_is_given() -> None:
    written: list[dict[str, Any]] = []
    kube = kube_served_by(_lease_answers("", written))
    clock = ManualClock(now=datetime(2026, 1, 1, 12, tzinfo=UTC))
    elector = LeaderElector(kube, TERMS, clock, lambda _: None)
    assert await elector._attempt()
    elector.is_leader = True
    clock.advance(1.5)
    assert await elector._attempt()
    acquired, renewed = (body["spec"] for body in written)
    assert acquired["acquireTime"] == acquired["renewTime"] == "2026-01-01T12:00:00.000000Z"
    assert renewed == {"renewTime": "2026-01-01T12:00:01.500000Z"}


async def test_a_standby_takes_a_lease_left_unrenewed_for_its_duration_on_its_clock() -> None:
    """Expiry is judged by when this replica first saw the holder's last renewal, on its own
    monotonic clock, not by the renewTime another replica wrote."""
    written: list[dict[str, Any]] = []
    kube = kube_served_by(_lease_answers("ctl-b", written))
    clock = ManualClock(monotonic=1000.0)
    elector = LeaderElector(kube, TERMS, clock, lambda _: None)
    for seconds in (0.0, 2.0, 1.0):  # seen at 1000.0, then 1002.0 and 1003.0: not yet over 3 s
        clock.advance(seconds)
        assert not await elector._attempt()
    clock.advance(0.5)
    assert await elector._attempt()
    (taken,) = written
    assert taken["spec"]["holderIdentity"] == "ctl-a"
    assert taken["spec"]["leaseTransitions"] == 1


def test_streaming_lists_are_off_unless_turned_on() -> None:
    assert parse_settings([], {}).streaming_lists is False
    assert parse_settings(["--streaming-lists"], {}).streaming_lists is True
    assert parse_settings([], {"ZEROSCALER_STREAMING_LISTS": "true"}).streaming_lists is True
    assert parse_settings(["--no-streaming-lists"], {}).streaming_lists is False


def test_warm_watches_are_on_unless_turned_off() -> None:
    assert parse_settings([], {}).warm_watches is True
    assert parse_settings(["--no-warm-watches"], {}).warm_watches is False
    assert parse_settings([], {"ZEROSCALER_WARM_WATCHES": "false"}).warm_watches is False
