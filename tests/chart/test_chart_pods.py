"""The chart's pods: the restricted Pod Security Standard, probes, the host network, the image,
where they are scheduled, their replicas, disruption budgets and priority classes.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from image import build as image_build
from testkit.real_chart import local_image
from tests.chart.conftest import RELEASE, Helm
from tests.chart.rendered import (
    APP_VERSION,
    HOST_NETWORK,
    Obj,
    certs_job,
    container,
    deployment,
    only,
    pod_specs,
    render,
    webhook_configuration,
)
from zeroscaler.api.credentials import in_cluster

# --- pods ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "pods"), [("split", 4), ("combined", 3)])
def test_every_pod_meets_the_restricted_pod_security_standard(
    helm: Helm, mode: str, pods: int
) -> None:
    specs = pod_specs(render(helm, mode=mode))
    assert len(specs) == pods
    for name, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert not spec.get("hostNetwork"), name
        assert not spec.get("hostPID"), name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["runAsNonRoot"] is True, name
            assert sc.get("privileged") is not True, name
            assert c["resources"]["requests"]["memory"], name
            assert c["resources"]["limits"]["memory"], name
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}, name


@pytest.mark.parametrize(
    ("component", "values", "scheme"),
    [
        ("controller", [], "HTTPS"),  # its metrics port is HTTPS with metricsAuthorization
        ("controller", ["--set", "controller.metricsAuthorization=false"], "HTTP"),
        ("webhook", [], "HTTPS"),
    ],
)
def test_probes_use_health_and_readiness_endpoints(
    helm: Helm, component: str, values: list[str], scheme: str
) -> None:
    c = container(deployment(render(helm, *values), component))
    ports = {p["name"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"]["scheme"] == scheme
        assert probe["httpGet"]["port"] in ports


def _containers(objs: list[Obj]) -> list[tuple[str, Obj]]:
    return [(name, c) for name, spec in pod_specs(objs) for c in spec["containers"]]


def test_host_network_puts_every_pod_in_the_nodes_network(helm: Helm) -> None:
    specs = pod_specs(render(helm, *HOST_NETWORK))
    assert len(specs) == 4
    for name, spec in specs:
        assert spec["hostNetwork"] is True, name
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet", name
    assert not any("dnsPolicy" in spec for _, spec in pod_specs(render(helm)))


@pytest.mark.parametrize(
    ("flags", "unavailable", "surge"),
    [([], 0, 1), (HOST_NETWORK, 1, 0)],
)
def test_rollouts_free_the_nodes_ports_first_on_the_host_network(
    helm: Helm, flags: list[str], unavailable: int, surge: int
) -> None:
    objs = render(helm, *flags)
    for component in ("controller", "webhook"):
        strategy = deployment(objs, component)["spec"]["strategy"]
        assert strategy == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge},
        }, component


def test_api_server_address_reaches_in_cluster_config_of_every_container(
    helm: Helm, tmp_path: Path
) -> None:
    for name, c in _containers(render(helm)):
        assert "KUBERNETES_SERVICE_HOST" not in {e["name"] for e in c.get("env") or []}, name
    objs = render(helm, "--set", "apiServer.host=127.0.0.1", "--set", "apiServer.port=6443")
    containers = _containers(objs)
    assert len(containers) == 4
    for name, c in containers:
        env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
        access = in_cluster(env, tmp_path)
        assert access.server == "https://127.0.0.1:6443", name


def test_default_image_is_the_release_name_with_the_charts_app_version(helm: Helm) -> None:
    for name, c in _containers(render(helm)):
        assert c["image"] == f"ghcr.io/zeroscaler/zeroscaler:{APP_VERSION}", name


def test_local_image_values_name_the_archive_make_image_builds(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"image": local_image()}))
    for name, c in _containers(render(helm, "--values", str(values))):
        assert c["image"] == image_build.default_name(), name  # docker.io/library/zeroscaler:V
        assert c["imagePullPolicy"] == "Never", name


DIGEST = f"sha256:{'ab' * 32}"


@pytest.mark.parametrize(
    ("flags", "image"),
    [
        (["--set", "image.registry=registry.example:5000"],
         f"registry.example:5000/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "global.imageRegistry=mirror.example/ghcr"],
         f"mirror.example/ghcr/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "global.imageRegistry=mirror.example", "--set", "image.registry=other.example"],
         f"mirror.example/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "image.registry=", "--set", "image.repository=zeroscaler"],
         f"zeroscaler:{APP_VERSION}"),
        (["--set", "image.tag=0.2.0-rc.1"], "ghcr.io/zeroscaler/zeroscaler:0.2.0-rc.1"),
        (["--set", "global.imageRegistry=mirror.example", "--set", f"image.digest={DIGEST}"],
         f"mirror.example/zeroscaler/zeroscaler@{DIGEST}"),
    ],
)  # fmt: skip
def test_image_reference_is_registry_repository_and_tag_or_digest(
    helm: Helm, flags: list[str], image: str
) -> None:
    images = {c["image"] for _, c in _containers(render(helm, *flags))}
    assert images == {image}


LINUX = {"kubernetes.io/os": "linux"}


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_every_pod_runs_on_linux_nodes_of_any_architecture(helm: Helm, mode: str) -> None:
    objs = render(helm, mode=mode)
    specs = pod_specs(objs)
    assert len(specs) == (4 if mode == "split" else 3)
    for name, spec in specs:
        assert spec["nodeSelector"] == LINUX, name
    assert "kubernetes.io/arch" not in yaml.safe_dump_all(objs)


def test_the_linux_selector_can_be_dropped(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.nodeSelector.kubernetes\\.io/os=null")
    assert "nodeSelector" not in deployment(objs, "controller")["spec"]["template"]["spec"]
    assert deployment(objs, "webhook")["spec"]["template"]["spec"]["nodeSelector"] == LINUX


@pytest.mark.parametrize("mode", ["job", "certManager"])
def test_configuration_annotations_reach_the_webhook_configuration(helm: Helm, mode: str) -> None:
    objs = render(
        helm,
        "--set", f"certificates.mode={mode}",
        "--set", "webhook.configurationAnnotations.admissions\\.enforcer/disabled=true",
    )  # fmt: skip
    annotations = webhook_configuration(objs)["metadata"]["annotations"]
    assert annotations["admissions.enforcer/disabled"] == "true"  # a string, as annotations are
    assert ("cert-manager.io/inject-ca-from" in annotations) is (mode == "certManager")


def test_the_webhook_configuration_has_no_annotations_by_default(helm: Helm) -> None:
    assert "annotations" not in webhook_configuration(render(helm))["metadata"]


def test_real_node_scheduling_reaches_every_pod(helm: Helm, tmp_path: Path) -> None:
    selector = {"zeroscaler.io/real-node": "true"}
    toleration = {"key": "zeroscaler.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
    values = tmp_path / "values.yaml"
    placement = {"nodeSelector": selector, "tolerations": [toleration]}
    values.write_text(
        yaml.safe_dump(
            {"controller": placement, "webhook": placement, "certificates": {"job": placement}}
        )
    )
    specs = pod_specs(render(helm, "--values", str(values)))
    assert len(specs) == 4
    for name, spec in specs:
        assert spec["nodeSelector"] == {**selector, **LINUX}, name
        assert spec["tolerations"] == [toleration], name


def test_controller_metrics_port_is_exposed_for_scraping(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.metricsPort=9100")
    c = container(deployment(objs, "controller"))
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in c["ports"]
    assert "--metrics-port=9100" in c["args"]
    service = only(objs, "Service", f"{RELEASE}-zeroscaler-controller-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_replicas_follow_values(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.replicas=3", "--set", "webhook.replicas=4")
    assert deployment(objs, "controller")["spec"]["replicas"] == 3
    assert deployment(objs, "webhook")["spec"]["replicas"] == 4


def test_disruption_budgets_select_each_components_pods(helm: Helm) -> None:
    objs = render(helm)
    for component in ("controller", "webhook"):
        pdb = only(objs, "PodDisruptionBudget", f"{RELEASE}-zeroscaler-{component}")
        pod_labels = deployment(objs, component)["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert pdb["spec"]["maxUnavailable"] == 1
    other = deployment(objs, "webhook")["spec"]["template"]["metadata"]["labels"]
    pdb = only(objs, "PodDisruptionBudget", f"{RELEASE}-zeroscaler-controller")
    assert not pdb["spec"]["selector"]["matchLabels"].items() <= other.items()


def test_disruption_budget_takes_min_available_and_can_be_off(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "webhook.podDisruptionBudget.minAvailable=1",
        "--set",
        "controller.podDisruptionBudget.enabled=false",
    )
    pdb = only(objs, "PodDisruptionBudget")
    assert pdb["metadata"]["name"] == f"{RELEASE}-zeroscaler-webhook"
    assert pdb["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in pdb["spec"]


def test_priority_class_for_every_pod(helm: Helm) -> None:
    objs = render(
        helm,
        "--set", "controller.priorityClassName=system-cluster-critical",
        "--set", "webhook.priorityClassName=high",
        "--set", "certificates.job.priorityClassName=batch",
    )  # fmt: skip
    assert deployment(objs, "controller")["spec"]["template"]["spec"]["priorityClassName"] == (
        "system-cluster-critical"
    )
    assert deployment(objs, "webhook")["spec"]["template"]["spec"]["priorityClassName"] == "high"
    assert certs_job(objs)["spec"]["template"]["spec"]["priorityClassName"] == "batch"
    for _, spec in pod_specs(render(helm)):
        assert "priorityClassName" not in spec
