"""The webhook's serving certificate in each certificate mode: the hook Job, cert-manager, a given
Secret, and the caBundle each puts in the configuration.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import base64

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    URL,
    certs_job,
    is_hook,
    only,
    render,
    tls_secret_of_webhook,
    webhook_configuration,
    webhook_entry,
)

# --- certificates --------------------------------------------------------------------------------


def test_certs_job_writes_the_mounted_secret_and_patches_this_configuration(
    helm: Helm,
) -> None:
    objs = render(helm)
    job = certs_job(objs)
    hooks = set(job["metadata"]["annotations"]["helm.sh/hook"].split(","))
    assert {"pre-install", "pre-upgrade", "post-install"} <= hooks
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "certs"
    assert f"--secret={tls_secret_of_webhook(objs)}" in args
    config_name = webhook_configuration(objs)["metadata"]["name"]
    assert f"--webhook-configuration={config_name}" in args
    assert f"--host={RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc" in args
    # The Job patches the caBundle; the chart leaves it out so upgrades keep it.
    assert "caBundle" not in webhook_entry(objs)["clientConfig"]
    # Its RBAC exists before it runs: lower hook weight, same hook events.
    for obj in objs:
        if is_hook(obj) and obj["kind"] != "Job" and obj["metadata"]["name"].endswith("-certs"):
            annotations = obj["metadata"]["annotations"]
            assert int(annotations["helm.sh/hook-weight"]) < 0
            assert set(annotations["helm.sh/hook"].split(",")) == hooks
            assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]


def test_cert_manager_mode_issues_the_secret_and_injects_the_ca(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.mode=certManager")
    assert not any(o["kind"] == "Job" and o["metadata"]["name"].endswith("-certs") for o in objs)
    config = webhook_configuration(objs)
    injected = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    namespace, certificate = injected.split("/")
    assert namespace == NAMESPACE
    serving = only(objs, "Certificate", certificate)
    assert serving["spec"]["secretName"] == tls_secret_of_webhook(objs)
    assert f"{RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    issuer = only(objs, "Issuer", serving["spec"]["issuerRef"]["name"])
    assert "ca" in issuer["spec"]
    ca = only(objs, "Certificate", issuer["spec"]["ca"]["secretName"])
    assert ca["spec"]["isCA"] is True
    assert "selfSigned" in only(objs, "Issuer", ca["spec"]["issuerRef"]["name"])["spec"]


def test_cert_manager_mode_can_use_an_existing_cluster_issuer(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "certificates.mode=certManager",
        "--set",
        "certificates.certManager.issuerRef.name=corp-ca",
        "--set",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert not any(o["kind"] == "Issuer" for o in objs)
    serving = only(objs, "Certificate")
    assert serving["spec"]["issuerRef"]["name"] == "corp-ca"
    assert serving["spec"]["issuerRef"]["kind"] == "ClusterIssuer"


def test_cert_manager_in_url_mode_certifies_the_ip_address(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "certificates.mode=certManager",
        "--set",
        "webhook.clientConfig.mode=url",
        "--set",
        f"webhook.clientConfig.url={URL}",
    )
    serving = only(objs, "Certificate", f"{RELEASE}-zeroscaler-webhook-serving")
    assert serving["spec"]["ipAddresses"] == ["127.0.0.1"]
    assert "dnsNames" not in serving["spec"]


def test_secret_mode_uses_a_given_secret_and_ca_bundle(helm: Helm) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    objs = render(
        helm,
        "--set",
        "certificates.mode=secret",
        "--set",
        "certificates.secretName=my-tls",
        "--set",
        f"certificates.caBundle={bundle}",
    )
    assert not any(is_hook(o) and "pre-delete" not in o["metadata"]["annotations"]["helm.sh/hook"]
                   for o in objs)  # fmt: skip
    assert not any(o["kind"] in ("Certificate", "Issuer") for o in objs)
    assert tls_secret_of_webhook(objs) == "my-tls"
    assert webhook_entry(objs)["clientConfig"]["caBundle"] == bundle
