"""The CLI's pure parts: the status table and items, request words, explain's lines, patches."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from typing import Any

import pytest

from image.python import LOCK
from zeroscaler.api import Forbidden, Transient
from zeroscaler.cli import build_parser, main, merge_connection, program_name
from zeroscaler.cli.control import event_message, patch_body
from zeroscaler.cli.explain import explain_lines
from zeroscaler.cli.servers import SERVER_MODULES
from zeroscaler.cli.session import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Target,
    UsageError,
    describe_request,
    failure_for,
    option,
    parse_target,
)
from zeroscaler.cli.status import format_table, last_wakes, render, render_savings, status_row
from zeroscaler.cli.workload_view import (
    KindScope,
    find_activator,
    index_hooks,
    index_links,
    read_view,
    serving_of,
)
from zeroscaler.core.activity import Activity
from zeroscaler.core.coverage import PROBE_WEBHOOK
from zeroscaler.core.durations import parse_time
from zeroscaler.core.idleness import Seen
from zeroscaler.core.kinds import APIResource, parse_kind_ref
from zeroscaler.core.links import Link, LinkKind, Serving
from zeroscaler.core.manual import Manual
from zeroscaler.core.scope import ResolvedScope

NOW = parse_time("2026-01-01T12:00:00Z")
ON = {"zeroscaler.io/enabled": "true"}
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", verbs=frozenset({"list", "watch"}))


def workload(name: str, ns: str, replicas: int, **annotations: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T08:00:00Z",
            "annotations": annotations,
        },
        "spec": {"replicas": replicas, "template": {"spec": {"serviceAccountName": "operator"}}},
    }


ASLEEP = workload(
    "op",
    "ops",
    0,
    **{
        "zeroscaler.io/idle-timeout": "10m",
        "zeroscaler.io/watched-kinds": "Widget.example.com, ConfigMap",
        "zeroscaler.io/state": "asleep",
        "zeroscaler.io/restore-replicas": "3",
        "zeroscaler.io/asleep-since": "2026-01-01T11:10:00Z",
        "zeroscaler.io/last-activity": "2026-01-01T11:00:00Z",
    },
)
AWAKE = workload(
    "ibm",
    "ops",
    2,
    **{
        "controller-zero-scaler/idleTimeout": "60s",
        "controller-zero-scaler/watchedKinds": '[{"apiVersion": "apps/v1", "Kind": "Deployment"}]',
        "zeroscaler.io/paused": "true",
        "zeroscaler.io/flapping": "woken 5 times by argocd-controller",
        "zeroscaler.io/wake-replicas": "many",
    },
)
EVENTS = [
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:00:00Z",
        "message": "ConfigMap ops/a changed: scaled from 0 to 3 replicas",
    },
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:30:00Z",
        "message": "Widget ops/w deleted: scaled from 0 to 3 replicas",
    },
]


def test_status_rows_show_state_restore_idleness_and_flags() -> None:
    asleep, awake = read_view(ASLEEP, ON), read_view(AWAKE, ON)
    row = status_row(asleep, last_wakes(EVENTS), NOW)
    assert (row.state, row.replicas, row.restore, row.idle_for, row.timeout) == (
        "asleep",
        "0",
        "3",
        "1h",
        "10m",
    )
    assert (row.flags, row.last_wake) == ("-", "Widget ops/w deleted")
    row = status_row(awake, {}, NOW)
    assert (row.state, row.restore, row.idle_for, row.timeout) == ("awake", "-", "4h", "1m")
    assert row.flags == "paused,flapping,invalid-annotations"


def test_awake_idleness_counts_from_the_newest_change_seen() -> None:
    view = read_view(AWAKE, ON)
    view.seen = Seen(parse_time("2026-01-01T11:58:00Z"), Activity("Widget", "ops", "w", "x"))
    assert status_row(view, {}, NOW).idle_for == "2m"
    view.complete = False  # some kinds could not be listed: it may be less
    assert status_row(view, {}, NOW).idle_for == "<=2m"


def test_a_scaled_up_sleeper_is_waking_and_one_we_slept_outside_is_unmanaged() -> None:
    waking = {**ASLEEP, "spec": {"replicas": 3}}
    assert status_row(read_view(waking, ON), {}, NOW).state == "waking"
    assert status_row(read_view(ASLEEP, {}), {}, NOW).state == "unmanaged"


def test_render_leaves_out_workloads_zeroscaler_has_nothing_to_do_with() -> None:
    plain = read_view(workload("web", "ops", 2), ON)
    text = render([read_view(ASLEEP, ON), plain], {}, NOW, "table", all_ns=False)
    header, line = text.splitlines()
    assert "NAMESPACE" not in header
    assert line.startswith("op ")
    assert render([plain], {}, NOW, "table", all_ns=False).startswith("No workloads")
    wide = render([read_view(ASLEEP, ON)], {}, NOW, "wide", all_ns=True)
    assert "WATCHED KINDS" in wide
    assert "Widget.example.com, ConfigMap" in wide


def test_json_items_carry_seconds_times_and_flags() -> None:
    doc = json.loads(render([read_view(AWAKE, ON)], {}, NOW, "json", all_ns=True))
    [item] = doc["items"]
    assert item["idleSeconds"] == 4 * 3600
    assert item["idleSince"] == "2026-01-01T08:00:00Z"
    assert (item["timeoutSeconds"], item["restore"], item["paused"]) == (60.0, None, True)
    assert item["flapping"] == "woken 5 times by argocd-controller"
    assert item["flags"] == ["paused", "flapping", "invalid-annotations"]
    assert (item["watched"], item["owned"], item["watchNamespaces"]) == (
        ["Deployment.v1.apps"],
        [],
        None,
    )
    assert item["problems"] == [
        "zeroscaler.io/wake-replicas: 'many' is not a whole number of replicas, 1 or more"
    ]


def test_a_sleeper_shows_the_replica_time_its_sleep_saved() -> None:
    # Asleep since 11:10 with 3 replicas remembered: 50 minutes of 3 replicas by noon.
    asleep = read_view(ASLEEP, ON)
    assert status_row(asleep, {}, NOW).saved == "2h30m"
    assert status_row(read_view(AWAKE, ON), {}, NOW).saved == "-"
    [item] = json.loads(render([asleep], {}, NOW, "json", all_ns=True))["items"]
    assert item["savedReplicaSeconds"] == 9000


def test_savings_sum_each_namespace_then_all() -> None:
    other = {**ASLEEP, "metadata": {**ASLEEP["metadata"], "namespace": "team", "uid": "u2"}}
    # Each of its pods requests a quarter core and 128Mi: three of them are given back.
    resources = {"requests": {"cpu": "250m", "memory": "128Mi"}}
    pod = {"containers": [{"name": "m", "resources": resources}]}
    other["spec"] = {**other["spec"], "template": {"spec": pod}}
    views = [read_view(o, ON) for o in (ASLEEP, AWAKE, other, workload("web", "ops", 2))]
    lines = render_savings(views, NOW, "table").splitlines()
    assert [line.split() for line in lines[1:]] == [
        ["ops", "2", "1", "3", "2h30m", "0", "0"],
        ["team", "1", "1", "3", "2h30m", "750m", "384Mi"],
        ["(all)", "3", "2", "6", "5h", "750m", "384Mi"],
    ]
    team = json.loads(render_savings(views, NOW, "json"))["items"][1]
    assert team["releasedCPUCores"] == 0.75
    assert team["releasedMemoryBytes"] == 384 * 2**20
    assert team["savedCPUCoreSeconds"] == 9000 * 0.25  # 2h30m of replica time, 250m each
    assert team["savedMemoryByteSeconds"] == 9000 * 128 * 2**20
    doc = json.loads(render_savings(views[:2], NOW, "json"))
    assert doc["items"] == [
        {
            "namespace": "ops",
            "managed": 2,
            "asleep": 1,
            "replicasNotRunning": 3,
            "savedReplicaSeconds": 9000,
            "releasedCPUCores": 0.0,
            "releasedMemoryBytes": 0,
            "savedCPUCoreSeconds": 0,
            "savedMemoryByteSeconds": 0,
        }
    ]


def test_format_table_aligns_columns() -> None:
    row = status_row(read_view(ASLEEP, ON), {}, NOW)
    header, line = format_table([row]).splitlines()
    assert header.index("STATE") == line.index("asleep")


@pytest.mark.parametrize(
    ("method", "path", "words"),
    [
        (
            "GET",
            "/apis/apps/v1/namespaces/ops/deployments",
            "list deployments.apps in namespace ops",
        ),
        ("GET", "/apis/apps/v1/deployments", "list deployments.apps in all namespaces"),
        ("GET", "/api/v1/namespaces/ops", "get namespaces ops"),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ops/deployments/op",
            "patch deployments.apps op in namespace ops",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ops/deployments/op/scale",
            "patch deployments.apps/scale op in namespace ops",
        ),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "create subjectaccessreviews.authorization.k8s.io in all namespaces",
        ),
    ],
)
def test_a_request_is_described_in_the_words_of_rbac_verbs_and_resources(
    method: str, path: str, words: str
) -> None:
    assert describe_request(method, path) == words


def test_failures_are_one_line_and_name_the_request() -> None:
    denied = failure_for(
        Forbidden(403, "Forbidden", "nope"), "GET", "/api/v1/namespaces/x/events", "https://k"
    )
    assert str(denied) == "access denied: you may not list events in namespace x (nope)"
    down = failure_for(
        Transient(0, "ConnectError", "refused"), "GET", "/api/v1/namespaces", "https://k"
    )
    assert str(down) == "cannot reach the API server at https://k (ConnectError: refused)"


@pytest.mark.parametrize(
    ("text", "namespace", "kind", "expected"),
    [
        ("op", None, None, Target("op")),
        ("op", "team", None, Target("op", "team")),
        ("deployment/op", None, None, Target("op", None, "Deployment")),
        ("deploy/op", "team", None, Target("op", "team", "Deployment")),
        ("Deployments.apps/op", None, "Deployment", Target("op", None, "Deployment")),
        ("sts/db", "team", None, Target("db", "team", "StatefulSet")),
        ("statefulset/db", None, None, Target("db", None, "StatefulSet")),
        ("ops/op", None, None, Target("op", "ops")),
        ("ops/op", "ops", "StatefulSet", Target("op", "ops", "StatefulSet")),
    ],
)
def test_parse_target_reads_kubectl_forms(
    text: str, namespace: str | None, kind: str | None, expected: Target
) -> None:
    assert parse_target(text, namespace, kind) == expected


@pytest.mark.parametrize(
    ("text", "namespace", "kind", "said"),
    [
        ("a/b/c", None, None, "is not NAME, TYPE/NAME"),
        ("/op", None, None, "is not NAME, TYPE/NAME"),
        ("ops/", None, None, "is not NAME, TYPE/NAME"),
        ("pod/op", None, None, "manages Deployments and StatefulSets (deployment/op, sts/op)"),
        ("svc/op", None, None, "a namespace named svc goes in -n svc"),
        ("ops/op", "team", None, "is in namespace ops, but -n says team"),
        ("sts/op", None, "Deployment", "names a StatefulSet, but --kind says Deployment"),
        ("ops/Op", None, None, "'Op' in 'ops/Op' is not a Kubernetes object name"),
        ("o_ps/op", None, None, "'o_ps' is neither a workload type nor a namespace"),
    ],
)
def test_parse_target_refuses_what_it_cannot_read(
    text: str, namespace: str | None, kind: str | None, said: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(said)):
        parse_target(text, namespace, kind)


def parse(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    merge_connection(args, parser)
    return args


def test_connection_flags_go_before_or_after_the_subcommand() -> None:
    before = parse("--context", "a", "--kubeconfig", "k", "-n", "ops", "wake", "deploy/op")
    after = parse("wake", "deploy/op", "--context", "a", "--kubeconfig", "k", "-n", "ops")
    for args in (before, after):
        assert (option(args, "context"), option(args, "kubeconfig")) == ("a", "k")
        assert option(args, "namespace") == "ops"
    assert option(parse("--context", "a", "status", "--context", "b"), "context") == "b"
    assert option(parse("status"), "namespace") is None
    # certs' own default namespace gives way to one written before the subcommand
    assert parse("-n", "zs", "certs").namespace == "zs"
    assert parse("certs").namespace == "zeroscaler"
    with pytest.raises(UsageError, match="--context is not an option of this command"):
        parse("--context", "a", "certs")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["wake", "pod/op"], "zeroscaler wake: 'pod/op': zeroscaler manages"),
        (["-n", "a", "explain", "b/op"], "is in namespace b, but -n says a"),
        (["-n", "a", "status", "-A"], "-n/--namespace and -A/--all-namespaces: give one"),
        (["--context", "x", "completion", "bash"], "--context is not an option"),
    ],
)
def test_wrong_command_lines_exit_2_before_connecting(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err
    assert len(err.strip().splitlines()) == 1


def test_version_and_exit_codes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"zeroscaler {metadata.version('kube-zeroscaler')}\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert "exit codes (the same for every command):" in help_text
    for code in (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED):
        assert f"\n  {code} " in help_text


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o bashdefault"), ("zsh", "#compdef zeroscaler"), ("fish", "complete -c")],
)
def test_completion_knows_every_subcommand(
    shell: str, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert marker in script
    for command in ("status", "explain", "sleep", "wake", "uninstall", "all-namespaces"):
        assert command in script


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_the_command_loads_no_server_dependency() -> None:
    code = (
        "import sys, zeroscaler.cli; "
        f"print(sorted(m for m in {sorted(SERVER_MODULES)!r} if m in sys.modules))"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_without_the_server_extra_what_needs_it_says_so() -> None:
    block = "import sys; [sys.modules.__setitem__(m, None) for m in ('cryptography', 'fastapi')]; "
    certs = run_python(block + "from zeroscaler.cli import main; sys.exit(main(['certs']))")
    assert certs.returncode == 1
    assert "pip install 'kube-zeroscaler[server]'" in certs.stderr
    webhook = run_python(block + "from zeroscaler.cli.servers import webhook; sys.exit(webhook())")
    assert webhook.returncode == 1
    assert webhook.stderr.startswith("zeroscaler-webhook: ")
    assert "Traceback" not in webhook.stderr
    status = run_python(block + "from zeroscaler.cli import main; main(['status', '--help'])")
    assert status.returncode == 0, status.stderr


def normal(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_image_lock_pins_the_command_and_the_server_extra() -> None:
    lines = LOCK.read_text().splitlines()
    pinned = {normal(line.split("==")[0]) for line in lines if "==" in line}
    project = tomllib.loads((LOCK.parents[1] / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["server"]]
    names = {normal(re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0]) for r in wanted}
    assert names <= pinned, names - pinned


def test_program_name_as_a_kubectl_plugin() -> None:
    assert program_name("/usr/local/bin/kubectl-zeroscaler") == "kubectl zeroscaler"
    assert program_name("zeroscaler") == "zeroscaler"


def test_one_patch_carries_replicas_and_status_with_a_precondition() -> None:
    plan = Manual("sleep", 3, {"zeroscaler.io/state": "asleep"})
    state = {"zeroscaler.io/state": "asleep"}
    assert patch_body(plan, "42") == {
        "metadata": {"resourceVersion": "42", "annotations": state, "labels": state},
        "spec": {"replicas": 0},
    }
    # The label rides along only when it does not say the state already.
    assert "labels" not in patch_body(plan, "42", {**state, "app": "x"})["metadata"]
    assert "spec" not in patch_body(Manual("restart-clock", 2, {}), "42")
    assert event_message(Manual("wake", 3), "alice", "wake", "X").startswith(
        "woken by alice (zeroscaler wake): scaled from 0 to 3 replicas"
    )


def test_explain_says_what_wakes_it_and_when_it_sleeps() -> None:
    awake = {**ASLEEP, "spec": ASLEEP["spec"] | {"replicas": 3}}
    awake["metadata"] = {
        **ASLEEP["metadata"],
        "annotations": {
            "zeroscaler.io/idle-timeout": "10m",
            "zeroscaler.io/watched-kinds": "Widget.example.com, ConfigMap",
            "zeroscaler.io/state": "awake",
            "zeroscaler.io/last-activity": "2026-01-01T11:55:00Z",
            "zeroscaler.io/enabled": "maybe",
        },
    }
    view = read_view(awake, ON)
    view.kinds = [
        KindScope(
            parse_kind_ref("Widget.example.com"),
            "zeroscaler.io/watched-kinds",
            False,
            WIDGET,
            ResolvedScope(True, frozenset({"ops"})),
            True,
            (("", False), ("ops", True)),
        ),
        KindScope(parse_kind_ref("ConfigMap"), "zeroscaler.io/watched-kinds", False),
    ]
    warning = {
        "type": "Warning",
        "reason": "NotPermitted",
        "message": "may not watch x",
        "count": 3,
        "lastTimestamp": "2026-01-01T11:59:00Z",
    }
    text = "\n".join(explain_lines(view, [warning], NOW))
    assert "Deployment ops/op: awake (3 replicas)" in text
    assert "Widget.example.com (watched, widgets.example.com): counts in namespace ops" in text
    assert "ServiceAccount ops/operator may watch it: all namespaces: no, ops: yes" in text
    assert "ConfigMap (watched): not served" in text
    assert "Sleeps: at 2026-01-01T12:05:00Z (in 5m), unless something changes." in text
    assert 'zeroscaler.io/enabled: \'maybe\' is not "true" or "false"; ignored' in text
    assert "Event NotPermitted, 3 times, last at 2026-01-01T11:59:00Z: may not watch x" in text


def test_explain_of_a_sleeper_says_why_it_sleeps() -> None:
    sleeping = {
        "reason": "Sleeping",
        "message": "idle for 10m (timeout 10m): scaled from 3 to 0",
        "lastTimestamp": "2026-01-01T11:10:00Z",
    }
    lines = explain_lines(read_view(ASLEEP, ON), [sleeping], NOW)
    assert lines[0] == "Deployment ops/op: asleep (0 replicas; wakes to 3)"
    assert "Put to sleep: idle for 10m (timeout 10m): scaled from 3 to 0" in lines
    assert any(line.startswith("Asleep since 2026-01-01T11:10:00Z (50m ago)") for line in lines)


HOOKS: dict[str, Any] = {
    "metadata": {"name": "op-hooks"},
    "webhooks": [
        {"name": "a", "clientConfig": {"service": {"namespace": "ops", "name": "op-webhook"}}},
        {"name": "b", "clientConfig": {"url": "https://elsewhere.example/"}},
    ],
}
SERVICES: list[dict[str, Any]] = [
    {"metadata": {"name": "op-webhook"}, "spec": {"selector": {"app": "op"}}},
    {"metadata": {"name": "other"}, "spec": {"selector": {"app": "other"}}},
    {"metadata": {"name": "by-hand"}, "spec": {}},
]


def serving_workload(**annotations: str) -> dict[str, Any]:
    obj = workload("op", "ops", 1, **annotations)
    obj["spec"]["template"]["metadata"] = {"labels": {"app": "op", "tier": "x"}}
    return obj


def test_what_a_workload_serves_is_read_as_the_controller_reads_it() -> None:
    links = index_links([("ValidatingWebhookConfiguration", HOOKS)])
    (link,) = links[("ops", "op-webhook")]  # the url-mode webhook names no Service
    view = read_view(serving_workload(), ON)
    assert serving_of(view, SERVICES, links).links == (link,)
    elsewhere = read_view({**serving_workload(), "metadata": {"namespace": "dev"}}, ON)
    assert serving_of(elsewhere, SERVICES, links).links == ()


AWAKE_SERVING = serving_workload(
    **{
        "zeroscaler.io/idle-timeout": "10m",
        "zeroscaler.io/state": "awake",
        "zeroscaler.io/last-activity": "2026-01-01T11:55:00Z",
    }
)


def test_explain_of_a_workload_that_serves_says_so_and_promises_no_sleep() -> None:
    view = read_view(AWAKE_SERVING, ON)
    view.serving = serving_of(
        view, SERVICES, index_links([("ValidatingWebhookConfiguration", HOOKS)])
    )
    lines = explain_lines(view, [], NOW)
    link = "ValidatingWebhookConfiguration op-hooks (Service ops/op-webhook)"
    assert lines[lines.index("Serves:") + 1] == f"  backs {link}"
    unanswered = "no activator answers for it (the activator is off); not put to sleep"
    assert f"Sleeps: backs {link}, and {unanswered}." in lines
    assert not any(line.startswith("Sleeps: at") for line in lines)

    # With the activator's configuration in the cluster, it sleeps when idle like any other.
    registrations: list[tuple[LinkKind, Any]] = [("ValidatingWebhookConfiguration", HOOKS)]
    activator = {"metadata": {"name": "0-zeroscaler-activator"}, "webhooks": [
        {"name": PROBE_WEBHOOK}]}  # fmt: skip
    view.serving = serving_of(
        view,
        SERVICES,
        index_links(registrations),
        index_hooks(registrations),
        find_activator([*registrations, ("MutatingWebhookConfiguration", activator)]),
    )
    lines = explain_lines(view, [], NOW)
    assert "  while it sleeps, the activator answers for its admission webhooks" in lines
    assert "Sleeps: at 2026-01-01T12:05:00Z (in 5m), unless something changes." in lines

    view.serving = serving_of(view, SERVICES, {})
    view.serving_unread = ["list apiservices"]
    lines = explain_lines(view, [], NOW)
    assert "  nothing the API server calls (no webhook, conversion or APIService)" in lines
    assert "  you may not list apiservices: it may serve more" in lines
    assert "Sleeps: at 2026-01-01T12:05:00Z (in 5m), unless something changes." in lines


def test_explain_of_a_sleeper_that_serves_says_it_is_woken() -> None:
    view = read_view(ASLEEP, ON)
    view.serving = Serving((Link("APIService", "v1.x.example.com", ("ops", "api")),))
    lines = explain_lines(view, [], NOW)
    assert (
        "Asleep since 2026-01-01T11:10:00Z (50m ago), but it backs APIService v1.x.example.com "
        "(Service ops/api); never put to sleep: the controller wakes it."
    ) in lines


def test_explain_without_the_serving_read_leaves_it_out() -> None:
    lines = explain_lines(read_view(AWAKE_SERVING, ON), [], NOW)
    assert "Serves:" not in lines


def test_status_flags_a_workload_kept_awake_by_what_it_serves() -> None:
    view = read_view(AWAKE_SERVING, ON)
    view.serving = serving_of(
        view, SERVICES, index_links([("ValidatingWebhookConfiguration", HOOKS)])
    )
    row = status_row(view, {}, NOW)
    assert row.flags == "serves"
    assert row.serves == "ValidatingWebhookConfiguration/op-hooks (Service ops/op-webhook)"
    assert "SERVES" in format_table([row], wide=True)
    (item,) = json.loads(render([view], {}, NOW, "json", False))["items"]
    assert item["serves"] == [
        {"kind": "ValidatingWebhookConfiguration", "name": "op-hooks", "service": "ops/op-webhook"}
    ]
    assert item["keptAwake"].startswith("backs ValidatingWebhookConfiguration op-hooks")
    plain = read_view(AWAKE_SERVING, ON)
    (item,) = json.loads(render([plain], {}, NOW, "json", False))["items"]
    assert item["serves"] is None
    assert item["keptAwake"] is None
    assert status_row(plain, {}, NOW).serves == "-"


def test_explain_of_a_sleeper_shows_the_next_wake_a_clock_asks_for() -> None:
    from zeroscaler.core.due import DueTime
    from zeroscaler.core.durations import parse_time

    plain = explain_lines(read_view(ASLEEP, ON), [], NOW)
    assert "Next wake: on a change only (no due time ahead, no max-sleep)." in plain
    due = {
        **ASLEEP["metadata"]["annotations"],
        "zeroscaler.io/max-sleep": "10h",
        "zeroscaler.io/due-times": "Widget.example.com=status.nextRun",
        "zeroscaler.io/due-lead": "5m",
    }
    view = read_view({**ASLEEP, "metadata": {**ASLEEP["metadata"], "annotations": due}}, ON)
    soon = DueTime(parse_time("2026-01-01T12:30:00Z"), "Widget ops/w status.nextRun")
    lines = explain_lines(view, [], NOW, [soon])
    assert (
        "Next wake: at 2026-01-01T12:25:00Z (in 25m): Widget ops/w status.nextRun is due at "
        "2026-01-01T12:30:00Z (woken 5m before)." in lines
    )
    # Without a due time ahead, max-sleep: within a tenth of it after, by its jitter.
    lines = explain_lines(view, [], NOW)
    (line,) = [line for line in lines if line.startswith("Next wake: at ")]
    assert "(max-sleep 10h): woken for one idle timeout though nothing changed." in line
