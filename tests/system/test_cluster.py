"""The local control plane is real: workloads get Pods, webhooks are called, CRDs are served."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.build import load_versions
from localcluster.cluster import Cluster
from testkit.recording_webhook import RecordingWebhook, recording_webhook
from testkit.relay import CuttableRelay
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.api import Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.cluster.informer import Informer, ListWatch, WatchEvent

SILENCE = 3.0  # in place of the minutes between the watch cache's bookmarks

IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only pretends to run containers


def _labels(name: str) -> dict[str, str]:
    return {"app": name}


def _pod_template(name: str) -> k8s.V1PodTemplateSpec:
    return k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(labels=_labels(name)),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image=IMAGE)]),
    )


def _ready_pods(api: k8s.ApiClient, ns: str, name: str) -> list[k8s.V1Pod]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"app={name}").items
    ready = []
    for pod in pods:
        conditions = {c.type: c.status for c in (pod.status.conditions or [])}
        if (
            pod.status.phase == "Running"
            and conditions.get("Ready") == "True"
            and pod.metadata.deletion_timestamp is None
            and (pod.spec.node_name or "").startswith("kwok-node-")
        ):
            ready.append(pod)
    return ready


def _pod_count(api: k8s.ApiClient, ns: str, name: str) -> int:
    return len(k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"app={name}").items)


def test_api_server_reports_the_pinned_version(cluster: Cluster) -> None:
    with cluster.client() as http:
        version = http.get("/version").json()
    assert version["gitVersion"] == f"v{load_versions().kubernetes}"


def test_deployment_runs_pods_on_kwok_nodes_and_scales(api: k8s.ApiClient, ns: str) -> None:
    with step("the Deployment runs a Ready pod on a kwok node"):
        apps = k8s.AppsV1Api(api)
        apps.create_namespaced_deployment(
            ns,
            k8s.V1Deployment(
                metadata=k8s.V1ObjectMeta(name="web"),
                spec=k8s.V1DeploymentSpec(
                    replicas=1,
                    selector=k8s.V1LabelSelector(match_labels=_labels("web")),
                    template=_pod_template("web"),
                ),
            ),
        )
        wait_for(lambda: _ready_pods(api, ns, "web"), "a Running, Ready pod of the Deployment")
        assert apps.list_namespaced_replica_set(ns).items, "the Deployment made no ReplicaSet"

    with step("at 0 replicas its pods are gone"):
        apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 0}})
        wait_for(lambda: _pod_count(api, ns, "web") == 0, "the pods to be gone at 0 replicas")

    with step("at 2 replicas two pods are Ready"):
        apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 2}})
        wait_for(lambda: len(_ready_pods(api, ns, "web")) == 2, "two Ready pods at 2 replicas")
        assert apps.read_namespaced_deployment_scale("web", ns).spec.replicas == 2


def test_statefulset_runs_pods_and_scales(api: k8s.ApiClient, ns: str) -> None:
    with step("the StatefulSet runs a Ready pod, db-0"):
        apps = k8s.AppsV1Api(api)
        apps.create_namespaced_stateful_set(
            ns,
            k8s.V1StatefulSet(
                metadata=k8s.V1ObjectMeta(name="db"),
                spec=k8s.V1StatefulSetSpec(
                    replicas=1,
                    service_name="db",
                    selector=k8s.V1LabelSelector(match_labels=_labels("db")),
                    template=_pod_template("db"),
                ),
            ),
        )
        wait_for(lambda: _ready_pods(api, ns, "db"), "a Running, Ready pod of the StatefulSet")
        assert _ready_pods(api, ns, "db")[0].metadata.name == "db-0"

    with step("at 0 replicas its pods are gone"):
        apps.patch_namespaced_stateful_set_scale("db", ns, {"spec": {"replicas": 0}})
        wait_for(lambda: _pod_count(api, ns, "db") == 0, "the pods to be gone at 0 replicas")

    with step("at 2 replicas db-0 and db-1 are Ready"):
        apps.patch_namespaced_stateful_set_scale("db", ns, {"spec": {"replicas": 2}})
        wait_for(lambda: len(_ready_pods(api, ns, "db")) == 2, "two Ready pods at 2 replicas")
        assert sorted(p.metadata.name for p in _ready_pods(api, ns, "db")) == ["db-0", "db-1"]


@pytest.fixture
def tls_webhook(tmp_path: Path) -> Iterator[RecordingWebhook]:
    with recording_webhook(tmp_path, "test.zeroscaler.io/mutated", "yes") as rec:
        yield rec


def test_api_server_calls_a_webhook_over_tls(
    api: k8s.ApiClient, ns: str, tls_webhook: RecordingWebhook
) -> None:
    k8s.CoreV1Api(api).patch_namespace(ns, {"metadata": {"labels": {"webhook-test": ns}}})
    reg = k8s.AdmissionregistrationV1Api(api)
    config_name = f"test-{ns}"
    reg.create_mutating_webhook_configuration(
        k8s.V1MutatingWebhookConfiguration(
            metadata=k8s.V1ObjectMeta(name=config_name),
            webhooks=[
                k8s.V1MutatingWebhook(
                    name="annotate.test.zeroscaler.io",
                    client_config=k8s.AdmissionregistrationV1WebhookClientConfig(
                        url=tls_webhook.url,
                        ca_bundle=base64.b64encode(tls_webhook.ca_pem).decode(),
                    ),
                    rules=[
                        k8s.V1RuleWithOperations(
                            operations=["CREATE"],
                            api_groups=["apps"],
                            api_versions=["v1"],
                            resources=["deployments"],
                        )
                    ],
                    namespace_selector=k8s.V1LabelSelector(match_labels={"webhook-test": ns}),
                    side_effects="None",
                    admission_review_versions=["v1"],
                    failure_policy="Fail",
                    timeout_seconds=5,
                )
            ],
        )
    )
    try:
        apps = k8s.AppsV1Api(api)

        def deployment(name: str) -> k8s.V1Deployment:
            return k8s.V1Deployment(
                metadata=k8s.V1ObjectMeta(name=name),
                spec=k8s.V1DeploymentSpec(
                    replicas=0,
                    selector=k8s.V1LabelSelector(match_labels=_labels(name)),
                    template=_pod_template(name),
                ),
            )

        # A new webhook configuration takes effect within moments; dry runs find out when.
        wait_for(
            lambda: (
                apps.create_namespaced_deployment(
                    ns, deployment("probe"), dry_run="All"
                ).metadata.annotations
                or {}
            ).get("test.zeroscaler.io/mutated"),
            "the webhook configuration to take effect",
        )
        apps.create_namespaced_deployment(ns, deployment("mutated"))
        stored = apps.read_namespaced_deployment("mutated", ns)
        assert stored.metadata.annotations["test.zeroscaler.io/mutated"] == "yes"
        assert tls_webhook.saw("Deployment", ns, "mutated") == ["CREATE"]
    finally:
        reg.delete_mutating_webhook_configuration(config_name)


@pytest.mark.parametrize("streaming", [False, True], ids=["listed in pages", "streamed list"])
def test_custom_resources_are_served_and_watched(
    api: k8s.ApiClient, cluster: Cluster, ns: str, streaming: bool
) -> None:
    group = f"g{secrets.token_hex(3)}.test.zeroscaler.io"
    ext = k8s.ApiextensionsV1Api(api)
    schema = k8s.V1JSONSchemaProps(type="object", x_kubernetes_preserve_unknown_fields=True)
    crd = k8s.V1CustomResourceDefinition(
        metadata=k8s.V1ObjectMeta(name=f"widgets.{group}"),
        spec=k8s.V1CustomResourceDefinitionSpec(
            group=group,
            scope="Namespaced",
            names=k8s.V1CustomResourceDefinitionNames(plural="widgets", kind="Widget"),
            versions=[
                k8s.V1CustomResourceDefinitionVersion(
                    name="v1",
                    served=True,
                    storage=True,
                    schema=k8s.V1CustomResourceValidation(open_apiv3_schema=schema),
                    subresources=k8s.V1CustomResourceSubresources(status={}),
                )
            ],
        ),
    )
    asyncio.run(
        _discovery_around(cluster, group, lambda: ext.create_custom_resource_definition(crd))
    )
    try:
        wait_for(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in (
                    ext.read_custom_resource_definition(f"widgets.{group}").status.conditions or []
                )
            ),
            "the CRD to be established",
        )
        events = asyncio.run(_watch_widget_lifecycle(cluster, group, ns, streaming))
        assert [(e.type, e.initial) for e in events] == [
            ("ADDED", False),
            ("MODIFIED", False),
            ("DELETED", False),
        ]
        assert events[1].obj["metadata"]["labels"] == {"touched": "yes"}
        assert events[1].old is not None
        assert not events[1].old["metadata"].get("labels")
    finally:
        ext.delete_custom_resource_definition(f"widgets.{group}")
    # The API server drops the group from discovery a while after the delete: the next test finds
    # discovery as it was before this one, not changing under its checks.
    asyncio.run(_discovery_gone(cluster, group))


async def _discovery_around(cluster: Cluster, group: str, create: Callable[[], object]) -> None:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        deadline = time.monotonic() + 60
        before = await kube.discover()
        # Unchanged, the server answers the ETag with 304 and the same list comes back unparsed.
        # What another test deleted may still be leaving discovery: ask until it holds still.
        while (again := await kube.discover()) is not before:
            assert time.monotonic() < deadline, "discovery never answered 304 for its ETag"
            before = again
            await asyncio.sleep(0.2)
        assert before
        assert not any(r.group == group for r in before)
        await asyncio.to_thread(create)
        deadline = time.monotonic() + 60
        after = await kube.discover()
        while not any(r.group == group for r in after):
            assert time.monotonic() < deadline, "discovery never served the new CRD"
            await asyncio.sleep(0.2)
            after = await kube.discover()
        assert after is not before
        assert set(before) <= set(after)


def test_a_watch_whose_connection_falls_silent_is_started_again(cluster: Cluster, ns: str) -> None:
    # The relay stops forwarding on the informer's open connections and closes none of them, as
    # when a NAT entry expires: only the missing minutely bookmark can tell.
    relay = CuttableRelay(int(cluster.server.rsplit(":", 1)[1]))
    try:
        seen = asyncio.run(_watch_through_a_stall(cluster, relay, ns))
    finally:
        relay.close()
    assert seen == ["after-stall"]


async def _watch_through_a_stall(cluster: Cluster, relay: CuttableRelay, ns: str) -> list[str]:
    access = load_access(str(cluster.kubeconfig))
    via = dataclasses.replace(access, server=f"https://127.0.0.1:{relay.port}")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    # Only the test's own maps: the root CA publisher may add its map to the new namespace late.
    mine = {"labelSelector": "test=stall"}
    async with Kube(access) as direct, Kube(via) as kube:
        informer = Informer(kube, path, ListWatch(metadata_only=True, silence=SILENCE), params=mine)
        added = asyncio.Event()
        seen: list[str] = []

        def record(event: WatchEvent) -> None:
            if event.type == "ADDED" and not event.initial:
                seen.append(event.obj["metadata"]["name"])
                added.set()

        informer.add_handler(record)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)
            assert relay.stall() >= 1
            await direct.create(
                path, {"metadata": {"name": "after-stall", "labels": {"test": "stall"}}}
            )
            # Seen after the silence, not at the watch's end minutes later.
            await asyncio.wait_for(added.wait(), SILENCE + 20)
            assert kube.errors[("WATCH", 0)] >= 1
            return seen
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _discovery_gone(cluster: Cluster, group: str) -> None:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        deadline = time.monotonic() + 60
        while any(r.group == group for r in await kube.discover()):
            assert time.monotonic() < deadline, f"discovery still serves {group}, deleted"
            await asyncio.sleep(0.2)


async def _watch_widget_lifecycle(
    cluster: Cluster, group: str, ns: str, streaming: bool
) -> list[WatchEvent]:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        resources = {r.resource: r for r in await kube.discover() if r.group == group}
        widgets = resources["widgets"]
        assert widgets.kind == "Widget"
        assert widgets.has_status
        informer = Informer(
            kube, widgets.api_path(), ListWatch(metadata_only=True, streaming=streaming)
        )
        seen: list[WatchEvent] = []
        three = asyncio.Event()

        def record(event: WatchEvent) -> None:
            seen.append(event)
            if len(seen) >= 3:
                three.set()

        informer.add_handler(record)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)
            assert informer.streaming is streaming  # this release streams lists
            path = widgets.api_path(ns)
            await kube.create(
                path, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}}
            )
            await kube.patch(f"{path}/w1", {"metadata": {"labels": {"touched": "yes"}}})
            await kube.delete(f"{path}/w1")
            await asyncio.wait_for(three.wait(), 30)
            return seen
        finally:
            task.cancel()
