"""What the chart gives Prometheus: ServiceMonitors for both components and alerts over metrics
that exist, all off by default.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from testkit.exposed_metrics import exposed as exposed_metrics
from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    MONITORING,
    RULES,
    kinds,
    only,
    render,
)

# --- monitoring, network policies, priority -----------------------------------------------------


def test_nothing_for_prometheus_by_default_and_network_policies_that_admit_scrapers(
    helm: Helm,
) -> None:
    objs = render(helm)
    assert not set(kinds(objs)) & {"ServiceMonitor", "PrometheusRule"}
    policies = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "NetworkPolicy"}
    webhook, controller = (
        policies[f"{RELEASE}-zeroscaler-webhook"],
        policies[f"{RELEASE}-zeroscaler-controller"],
    )
    # The webhook's port from any source (where the API server calls from differs by platform),
    # the metrics port from the usual scrapers only.
    assert webhook["ingress"] == [{"ports": [{"port": 10250, "protocol": "TCP"}]}]
    [rule] = controller["ingress"]
    [peer] = rule["from"]
    assert peer["namespaceSelector"] == {}
    assert peer["podSelector"]["matchExpressions"][0]["values"][0] == "prometheus"
    off = render(helm, "--set", "networkPolicy.enabled=false")
    assert "NetworkPolicy" not in kinds(off)


def test_service_monitors_scrape_both_components_through_their_services(helm: Helm) -> None:
    objs = render(helm, *MONITORING, "--set", "monitoring.serviceMonitor.labels.release=prom")
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    for component, port, scheme in (
        ("controller", "metrics", "https"),  # with Prometheus's own token
        ("webhook", "https", "https"),
    ):
        monitor = only(objs, "ServiceMonitor", f"{RELEASE}-zeroscaler-{component}")
        assert monitor["metadata"]["labels"]["release"] == "prom"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        wanted = monitor["spec"]["selector"]["matchLabels"]
        [service] = [
            svc for svc in services.values()
            if wanted.items() <= svc["metadata"]["labels"].items()
        ]  # fmt: skip
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
        assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", scheme)
        assert service["spec"]["ports"][0]["name"] == port
        if component == "controller":
            assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")


@pytest.mark.parametrize(
    ("values", "tls"),
    [
        ([], {
            "serverName": f"{RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc",
            "ca": {"secret": {"name": f"{RELEASE}-zeroscaler-webhook-tls", "key": "ca.crt"}},
        }),
        (["--set", "certificates.mode=secret"], {"insecureSkipVerify": True}),
        (["--set", "monitoring.serviceMonitor.webhookTlsConfig.serverName=x"], {"serverName": "x"}),
    ],
)  # fmt: skip
def test_the_webhook_monitor_trusts_the_ca_in_use(
    helm: Helm, values: list[str], tls: dict[str, Any]
) -> None:
    objs = render(helm, *MONITORING, *values)
    [endpoint] = only(objs, "ServiceMonitor", f"{RELEASE}-zeroscaler-webhook")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == tls


def test_service_monitor_needs_the_controller_metrics_service(helm: Helm) -> None:
    proc = helm.template(*MONITORING, "--set", "controller.metricsService.enabled=false")
    assert proc.returncode != 0
    assert "controller.metricsService.enabled" in proc.stderr


def test_alerts_cover_wakes_sleepers_and_the_webhook_with_metrics_that_exist(helm: Helm) -> None:
    rule = only(
        render(helm, *RULES, "--set", "monitoring.prometheusRule.labels.team=ops"), "PrometheusRule"
    )
    assert rule["metadata"]["labels"]["team"] == "ops"
    [group] = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == {
        "ZeroscalerNoLeader",
        "ZeroscalerWakesFailing",
        "ZeroscalerWakesSlow",
        "ZeroscalerStuckAsleep",
        "ZeroscalerWebhookErrors",
        "ZeroscalerWebhookNotReady",
        "ZeroscalerWebhookCertificateExpiring",
    }
    exposed = set(exposed_metrics())
    for name, alert in alerts.items():
        used = set(re.findall(r"\b(zeroscaler_[a-z_]+)\{", alert["expr"]))
        assert used, name
        assert used <= exposed, f"{name} uses {sorted(used - exposed)}"
        # Each selector names this release's namespace: another install's pods do not count.
        assert alert["expr"].count("zeroscaler_") == alert["expr"].count(f'namespace="{NAMESPACE}"')
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"]
    assert 'outcome=~"error|rejected"' in alerts["ZeroscalerWebhookErrors"]["expr"]
    assert "zeroscaler_wake_latency_seconds_bucket" in alerts["ZeroscalerWakesSlow"]["expr"]
    assert "zeroscaler_wake_failures_total" in alerts["ZeroscalerWakesFailing"]["expr"]
    assert "zeroscaler_pending_wakes" in alerts["ZeroscalerStuckAsleep"]["expr"]


def test_alert_thresholds_are_values(helm: Helm) -> None:
    objs = render(
        helm, *RULES,
        "--set", "monitoring.prometheusRule.wakeLatencySeconds=2",
        "--set", "monitoring.prometheusRule.stuckAsleepFor=30m",
        "--set-json", "monitoring.prometheusRule.webhookErrorRatio=0.2",
        "--set", "certificates.mode=certManager",
    )  # fmt: skip
    alerts = {r["alert"]: r for r in only(objs, "PrometheusRule")["spec"]["groups"][0]["rules"]}
    assert alerts["ZeroscalerWakesSlow"]["expr"].endswith("> 2")
    assert alerts["ZeroscalerStuckAsleep"]["for"] == "30m"
    assert alerts["ZeroscalerWebhookErrors"]["expr"].endswith("> 0.2")
    # cert-manager renews, not the webhook: its expiry gauge is not exported then.
    assert "ZeroscalerWebhookCertificateExpiring" not in alerts
