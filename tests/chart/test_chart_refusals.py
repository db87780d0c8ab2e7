"""Values the chart refuses, each with a message that names the value and what to set instead.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import pytest

from tests.chart.conftest import Helm

# --- values that are refused ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "replicaCount=2"], "replicaCount"),
        (["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
        (["--set", "controller.replicas=two"], "replicas"),
        (["--set", "webhook.timeoutSeconds=60"], "timeoutSeconds"),
        (["--set", "certificates.mode=vault"], "mode"),
        (["--set", "webhook.clientConfig.mode=url"], "url"),
        (
            [
                "--set",
                "webhook.clientConfig.mode=url",
                "--set",
                "webhook.clientConfig.url=http://127.0.0.1:9443/mutate",
            ],
            "url",
        ),
        (["--set", "policy.defaults.idleTimeout=ten minutes"], "idleTimeout"),
        (["--set", "policy.inference.maxKinds=0"], "maxKinds"),
        (["--set", "logLevel=loud"], "logLevel"),
        (["--set", "logFormat=yaml"], "logFormat"),
        (["--set", "controller.rbac.watchAll=false"], "watchAll"),
        (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (["--set", "image.registry=https://ghcr.io"], "registry"),
        (["--set", "global.imageRegistry=mirror.example/"], "imageRegistry"),
        (["--set", "image.repository=zeroscaler/zeroscaler:0.1.0"], "repository"),
        (
            ["--set-json", 'webhook.configurationAnnotations={"a": {"b": 1}}'],
            "configurationAnnotations",
        ),
        (["--set", "hostNetwork=yes"], "hostNetwork"),
        (["--set", "apiServer.host=https://127.0.0.1"], "host"),
        (["--set", "apiServer.port=0"], "port"),
        (["--set", "monitoring.serviceMonitor.every=1m"], "every"),
        (["--set", "monitoring.prometheusRule.stuckAsleepFor=soon"], "stuckAsleepFor"),
        (["--set-json", "monitoring.prometheusRule.webhookErrorRatio=2"], "webhookErrorRatio"),
        (["--set", "networkPolicy.webhook.from=anyone"], "from"),
        (["--set-json", 'webhook.excludeNamespaces=["Bad_Name"]'], "excludeNamespaces"),
        (["--set-json", "certificates.job.renewal.fraction=1.5"], "fraction"),
    ],
)
def test_schema_rejects_bad_values(helm: Helm, flags: list[str], message: str) -> None:
    proc = helm.template(*flags)
    assert proc.returncode != 0, f"{flags} were accepted"
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("version", "accepted"),
    [("1.29.9", False), ("1.30.0", True), ("1.30.2-gke.1", True), ("1.36.3", True)],
)
def test_chart_needs_kubernetes_1_30_or_newer(helm: Helm, version: str, accepted: bool) -> None:
    proc = helm.template("--kube-version", version)
    assert (proc.returncode == 0) is accepted, proc.stderr
    if not accepted:
        assert "kubeVersion" in proc.stderr


def test_renewal_settle_shorter_than_two_syncs_fails_with_guidance(helm: Helm) -> None:
    proc = helm.template(
        "--set", "certificates.job.renewal.syncInterval=10",
        "--set", "certificates.job.renewal.settle=15",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "certificates.job.renewal.settle (15) must be at least twice syncInterval" in proc.stderr


def test_url_mode_without_a_url_fails_with_guidance(helm: Helm) -> None:
    proc = helm.template("--set", "webhook.clientConfig.mode=url")
    assert proc.returncode != 0
    assert "webhook.clientConfig.url is required" in proc.stderr
    assert "https://127.0.0.1:9443/mutate" in proc.stderr
