"""A real operator built with controller-runtime (examples/widget-operator) in its own image on the
real node: its reconciler, its defaulting and validating webhooks called by the API server, its
leader election; and what today's zeroscaler does with an operator that serves its own webhooks.

The install is `testkit/go_operator.py`'s, so a later test (an activator that lets such an
operator sleep) installs the same operator the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster import realnode
from localcluster.cluster import Cluster
from testkit import go_operator
from testkit.activator import start_zeroscaler, stop_zeroscaler
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_workload,
    grant_watch,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.go_operator import GoOperator, create_widget, read_widget
from testkit.steps import step
from testkit.waiting import wait_for
from tests.system.test_cli import cli, ok

pytestmark = pytest.mark.cluster


@pytest.fixture
def reachable(
    cluster: Cluster, api: k8s.ApiClient, ns: str, real_node: realnode.RealNode
) -> Iterator[GoOperator]:
    """The operator, its webhooks registered by URL on 127.0.0.1: no Service links them to it, so
    zeroscaler's controller (not running here anyway) would not know it serves them."""
    with go_operator.installed(cluster, api, ns, registration="url") as op:
        yield op


def test_it_reconciles_and_its_webhooks_default_and_deny_through_the_api_server(
    api: k8s.ApiClient, reachable: GoOperator
) -> None:
    with step("runs on the real node and holds its Lease"):
        op = reachable
        pod = go_operator.wait_ready(api, op)
        assert pod.spec.node_name == realnode.NODE_NAME
        (status,) = pod.status.container_statuses
        assert status.image.endswith(go_operator.IMAGE.rpartition("/")[2])
        holder = wait_for(lambda: go_operator.lease_holder(api, op), "the operator's Lease held")
        assert holder

    with step("its webhooks default a Widget and refuse invalid ones"):
        defaulted = create_widget(api, op.namespace, "plain", size=3)
        assert defaulted["spec"] == {"size": 3, "color": "blue"}  # the mutating webhook's default
        given = create_widget(api, op.namespace, "red", size=2, color="red")
        assert given["spec"]["color"] == "red"
        for bad, spec in (("huge", {"size": 99}), ("sizeless", {"color": "red"})):
            with pytest.raises(ApiException) as refused:
                create_widget(api, op.namespace, bad, **spec)
            assert refused.value.status == 403
            assert "spec.size must be an integer from 1 to 10" in str(refused.value.body)

    with step("its reconciler writes each Widget's status"):

        def observed(name: str) -> str:
            return str(
                (read_widget(api, op.namespace, name).get("status") or {}).get("observed", "")
            )

        wait_for(lambda: observed("plain") == "size=3 color=blue", "the reconciler's status")
        wait_for(lambda: observed("red") == "size=2 color=red", "the reconciler's status")
    with step("its log shows the Lease acquired, the review and the reconciles"):
        log = go_operator.logs(api, op)
        acquired = [line for line in log.splitlines() if "Successfully acquired lease" in line]
        assert any(f'"{op.namespace}/{go_operator.LEASE}"' in line for line in acquired)
        reviewed = [line for line in log.splitlines() if "reviewed widget" in line]
        assert any(f"{op.namespace}/huge" in line and "validate" in line for line in reviewed)
        assert "reconciled widget" in log


def test_with_its_webhooks_named_by_service_it_is_never_put_to_sleep(
    cluster: Cluster,
    api: k8s.ApiClient,
    opted_ns: str,
    controller: ControllerProcess,
    real_node: realnode.RealNode,
) -> None:
    """As its users register it (`clientConfig.service`, `failurePolicy: Fail`), with no activator
    (this controller has none): zeroscaler keeps it awake, says why, and the CLI shows it."""
    with step("a workload beside it whose timeout is as short"):
        config = config_for("2s", go_operator.WATCHED_KIND, watch_namespaces=opted_ns)
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        plain = create_workload(
            api,
            opted_ns,
            "plain",
            config_for("2s", "ConfigMap", watch_namespaces=opted_ns),
            paused=True,
        )
    with go_operator.installed(cluster, api, opted_ns, annotations=config) as op:
        with step("its webhooks are found and it stays awake past its timeout"):
            ref = Ref(opted_ns, go_operator.NAME)
            # Both links are found at once, and warnings of one reason are written as one Event.
            link = f"WebhookConfiguration {op.configurations} (Service {opted_ns}/{op.service})"
            wait_event(api, ref, "BacksWebhook", link)
            go_operator.wait_ready(api, op)
            wait_asleep(api, plain, 3)  # its timeout has passed: the operator's has too
            replicas, annotations = state_of(api, ref)
            assert replicas == 1
            assert annotations.get("zeroscaler.io/state") != "asleep"
            assert "Sleeping" not in reasons(api, ref)

        with step("explain says what it backs and that it is not put to sleep"):
            explained = ok(
                cli("explain", f"{opted_ns}/{go_operator.NAME}", kubeconfig=cluster.kubeconfig)
            )
            assert "Serves:" in explained
            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                assert (
                    f"  backs {kind} {op.configurations} (Service {opted_ns}/{op.service})"
                    in explained
                )
            assert "Sleeps: backs " in explained
            assert "the activator is off); not put to sleep" in explained
            assert "Sleeps: at" not in explained

        with step("status shows what it serves"):
            shown = ok(cli("status", "-n", opted_ns, "-o", "wide", kubeconfig=cluster.kubeconfig))
            row = next(line for line in shown.splitlines() if line.startswith(go_operator.NAME))
            assert "serves" in row
            assert (
                f"ValidatingWebhookConfiguration/{op.configurations} "
                f"(Service {opted_ns}/{op.service})" in row
            )


def test_with_the_activator_it_sleeps_and_a_widget_created_meanwhile_wakes_it(
    cluster: Cluster, api: k8s.ApiClient, opted_ns: str, policy_ns: str, tmp_path: Path,
    real_node: realnode.RealNode,
) -> None:  # fmt: skip
    """The operator as its users run it, zeroscaler with the activator: it sleeps when idle; a
    Widget created while it sleeps is neither refused nor unchecked (defaulted and validated by
    the woken operator itself), and the operator reconciles it, then sleeps again."""
    zs = start_zeroscaler(cluster, api, policy_ns, tmp_path)
    try:
        config = config_for("3s", go_operator.WATCHED_KIND, watch_namespaces=opted_ns)
        with go_operator.installed(cluster, api, opted_ns, annotations=config) as op:
            with step("it sleeps when idle"):
                ref = Ref(opted_ns, go_operator.NAME)
                go_operator.wait_ready(api, op)
                wait_asleep(api, ref, 1, timeout=120)
            with step("an invalid Widget, refused by its own webhook, wakes it; it sleeps again"):
                # Asleep: an invalid Widget is refused by the operator's own validating webhook.
                with pytest.raises(ApiException) as refused:
                    create_widget(api, op.namespace, "huge", size=99)
                assert refused.value.status == 403
                assert "spec.size must be an integer from 1 to 10" in str(refused.value.body)
                wait_event(api, ref, "Woken", "admission request: CREATE widgets")
                wait_asleep(api, ref, 1, timeout=120)
            with step("a valid Widget, defaulted and reconciled once it wakes; it sleeps again"):
                # Asleep again: a valid one is defaulted by its mutating webhook, then reconciled.
                made = create_widget(api, op.namespace, "plain", size=3)
                assert made["spec"] == {"size": 3, "color": "blue"}

                def observed() -> str:
                    status = read_widget(api, op.namespace, "plain").get("status") or {}
                    return str(status.get("observed", ""))

                wait_for(
                    lambda: observed() == "size=3 color=blue", "the woken operator's reconcile"
                )
                assert "BacksWebhook" not in reasons(api, ref)
                wait_asleep(api, ref, 1, timeout=120)
    finally:
        stop_zeroscaler(api, zs)
