"""The command lines the chart passes, parsed by the programs' own parsers: the controller's, the
webhook's, `zeroscaler certs` and `zeroscaler uninstall`, and the secrets the webhook mounts.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import argparse

import pytest
from pydantic_settings import CliApp

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    args_of,
    certs_job,
    container,
    deployment,
    is_hook,
    only,
    render,
    tls_secret_of_webhook,
    webhook_configuration,
    webhook_entry,
)
from zeroscaler.certs.command import add_certs
from zeroscaler.controller.flags import parse_settings as parse_controller_flags
from zeroscaler.controller.uninstall import add_uninstall
from zeroscaler.webhook.settings import WebhookSettings

# --- command lines, checked against the programs' own parsers ------------------------------------


def test_controller_flags_are_understood_by_zeroscaler_controller(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.dryRun=true", "--set", "logLevel=debug")
    settings = parse_controller_flags(args_of(objs, "controller"))
    assert settings.dry_run is True
    assert settings.log_level == "debug"
    assert settings.lease_namespace == NAMESPACE
    assert settings.policy_source == NAMESPACE  # the policy ConfigMaps the webhook reads too
    assert settings.excluded == {"kube-system", NAMESPACE}
    assert settings.lease_name == f"{RELEASE}-zeroscaler-controller"
    assert settings.id == "pod-0"
    assert settings.metrics_host == "0.0.0.0"
    assert settings.metrics_port == 8080
    assert settings.log_format == "text"
    env = {e["name"] for e in container(deployment(objs, "controller"))["env"]}
    assert "POD_NAME" in env


def test_the_log_format_value_reaches_both_components(helm: Helm) -> None:
    objs = render(helm, "--set", "logFormat=json")
    assert parse_controller_flags(args_of(objs, "controller")).log_format == "json"
    assert CliApp.run(WebhookSettings, cli_args=args_of(objs, "webhook")).log_format == "json"


def test_webhook_flags_are_understood_by_zeroscaler_webhook(helm: Helm) -> None:
    objs = render(helm)
    settings = CliApp.run(WebhookSettings, cli_args=args_of(objs, "webhook"))
    assert settings.namespace == NAMESPACE
    assert settings.host == "0.0.0.0"
    assert settings.port == 10250  # what a GKE private control plane reaches without a rule
    mounts = {
        m["name"]: m["mountPath"] for m in container(deployment(objs, "webhook"))["volumeMounts"]
    }
    # Renewing, it writes the Secret's pair into its writable scratch volume.
    assert settings.cert_file == f"{mounts['tmp']}/tls/tls.crt"
    assert settings.key_file == f"{mounts['tmp']}/tls/tls.key"
    assert settings.cert_secret == f"{RELEASE}-zeroscaler-webhook-tls"
    assert settings.cert_webhook_configuration == f"{RELEASE}-zeroscaler"
    assert settings.cert_renew_fraction == 0.67
    assert settings.cert_serving_lifetime == 365 * 86400
    assert settings.cert_ca_lifetime == 3650 * 86400
    assert (settings.cert_sync_interval, settings.cert_settle) == (10, 60)


def test_renewal_values_reach_the_webhook_flags(helm: Helm) -> None:
    objs = render(
        helm,
        "--set-json", "certificates.job.renewal.fraction=0.5",
        "--set", "certificates.job.renewal.servingLifetime=720h",
        "--set", "certificates.job.renewal.caLifetime=8760h",
        "--set", "certificates.job.renewal.syncInterval=5",
        "--set", "certificates.job.renewal.settle=30",
    )  # fmt: skip
    settings = CliApp.run(WebhookSettings, cli_args=args_of(objs, "webhook"))
    assert settings.cert_renew_fraction == 0.5
    assert settings.cert_serving_lifetime == 720 * 3600
    assert settings.cert_ca_lifetime == 8760 * 3600
    assert (settings.cert_sync_interval, settings.cert_settle) == (5, 30)


def test_webhook_flags_without_renewal_serve_the_mounted_pair(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.mode=certManager")
    settings = CliApp.run(WebhookSettings, cli_args=args_of(objs, "webhook"))
    mounts = {
        m["name"]: m["mountPath"] for m in container(deployment(objs, "webhook"))["volumeMounts"]
    }
    assert settings.cert_file == f"{mounts['tls']}/tls.crt"
    assert settings.key_file == f"{mounts['tls']}/tls.key"
    assert settings.cert_secret == ""


def test_certs_job_flags_are_understood_by_zeroscaler_certs(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.job.renewBefore=48h")
    parser = argparse.ArgumentParser(prog="zeroscaler")
    add_certs(parser.add_subparsers(dest="command", required=True))
    job = certs_job(objs)["spec"]["template"]["spec"]["containers"][0]
    assert job["command"] == ["zeroscaler"]
    args = parser.parse_args(job["args"])
    assert args.command == "certs"
    assert args.namespace == NAMESPACE
    assert args.secret == tls_secret_of_webhook(objs)
    assert args.webhook_configuration == webhook_configuration(objs)["metadata"]["name"]
    service = webhook_entry(objs)["clientConfig"]["service"]["name"]
    assert args.service == service
    assert args.renew_before == "48h"
    assert f"{service}.{NAMESPACE}.svc" in args.host


@pytest.mark.parametrize(("mode", "secret"), [("job", True), ("certManager", False)])
def test_uninstall_hook_flags_are_understood_by_zeroscaler_uninstall(
    helm: Helm, mode: str, secret: bool
) -> None:
    objs = render(helm, "--set", f"certificates.mode={mode}")
    job = only(objs, "Job", f"{RELEASE}-zeroscaler-uninstall")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    [c] = job["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["zeroscaler"]
    parser = argparse.ArgumentParser(prog="zeroscaler")
    add_uninstall(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(c["args"])
    assert args.command == "uninstall"
    assert args.namespace == NAMESPACE
    assert args.controller == deployment(objs, "controller")["metadata"]["name"]
    lease = next(
        a.split("=", 1)[1]
        for a in container(deployment(objs, "controller"))["args"]
        if a.startswith("--lease-name=")
    )
    assert args.lease == lease
    assert args.webhook_configuration == webhook_configuration(objs)["metadata"]["name"]
    # The TLS Secret goes only where zeroscaler wrote it; cert-manager's and yours stay.
    assert args.secret == (tls_secret_of_webhook(objs) if secret else None)
    # Its RBAC exists before it runs.
    for obj in objs:
        if is_hook(obj) and obj["metadata"]["name"].endswith("-uninstall") and obj is not job:
            assert obj["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
            assert int(obj["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0


def test_uninstall_hook_can_be_turned_off(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.uninstall.enabled=false")
    assert not [o for o in objs if o["metadata"]["name"].endswith("-uninstall")]


@pytest.mark.parametrize("mode", ["certManager", "secret"])
def test_webhook_pods_mount_only_the_serving_pair(helm: Helm, mode: str) -> None:
    objs = render(helm, "--set", f"certificates.mode={mode}")
    volumes = deployment(objs, "webhook")["spec"]["template"]["spec"]["volumes"]
    tls = next(v for v in volumes if "secret" in v)
    assert sorted(item["key"] for item in tls["secret"]["items"]) == ["tls.crt", "tls.key"]


def test_a_renewing_webhook_mounts_no_secret(helm: Helm) -> None:
    volumes = deployment(render(helm), "webhook")["spec"]["template"]["spec"]["volumes"]
    assert not [v for v in volumes if "secret" in v]
