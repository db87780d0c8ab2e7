"""`zeroscaler check`'s verdicts, from objects as the API server returns them and literal times."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest

from zeroscaler.core.install_check import (
    Review,
    binds,
    bundle_verdict,
    certificates,
    flag_value,
    injected,
    lease_verdict,
    ready_endpoints,
    reviews_for,
    subject_access_review,
)

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)


def _pem(*bodies: bytes) -> bytes:
    return b"".join(
        b"-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(body) + b"-----END CERTIFICATE-----\n"
        for body in bodies
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


CA, OTHER, LEAF = b"ca-der-bytes" * 4, b"other-ca-der" * 4, b"leaf-der-bytes" * 4


@pytest.mark.parametrize(
    ("spec", "ok", "said"),
    [
        ({"holderIdentity": "zs-0", "renewTime": "2026-12-06T11:59:57.000000Z",
          "leaseDurationSeconds": 15}, True, "zs-0 holds Lease ns/l (renewed 3s ago)"),
        ({"holderIdentity": "zs-0", "renewTime": "2026-12-06T11:59:00.000000Z",
          "leaseDurationSeconds": 15}, False, "last renewed it 60s ago, its duration is 15s"),
        ({"holderIdentity": "", "renewTime": "2026-12-06T11:59:57Z",
          "leaseDurationSeconds": 15}, False, "held by nobody"),
        ({"holderIdentity": "zs-0"}, False, "no renewTime or leaseDurationSeconds"),
        ({"holderIdentity": "zs-0", "renewTime": "yesterday", "leaseDurationSeconds": 15},
         False, "unreadable"),
        # A renewal a little ahead of the API server's clock (clocks skew) still counts.
        ({"holderIdentity": "zs-1", "renewTime": "2026-12-06T12:00:01Z",
          "leaseDurationSeconds": 15}, True, "renewed 0s ago"),
    ],
)  # fmt: skip
def test_a_lease_leads_while_renewed_within_its_duration(
    spec: dict[str, Any], ok: bool, said: str
) -> None:
    verdict = lease_verdict({"spec": spec}, "ns/l", NOW)
    assert (verdict.part, verdict.ok) == ("controller leads", ok)
    assert said in verdict.detail


def test_no_lease_is_no_leader() -> None:
    verdict = lease_verdict(None, "ns/l", NOW)
    assert not verdict.ok
    assert "no Lease ns/l" in verdict.detail


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["--lease-name=zs", "--id=$(POD_NAME)"], "zs"),
        (["--id", "x", "--lease-name", "other"], "other"),
        (["--lease-name"], None),
        ([], None),
    ],
)
def test_a_flag_is_read_from_container_args(args: list[str], value: str | None) -> None:
    assert flag_value(args, "--lease-name") == value


def test_certificates_are_read_from_pem_whatever_else_it_holds() -> None:
    text = b"junk\n" + _pem(CA) + b"-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n"
    assert certificates(text + _pem(OTHER)) == [CA, OTHER]
    assert certificates(b"nothing") == []


@pytest.mark.parametrize(
    ("bundle", "data", "ok", "said"),
    [
        (_b64(_pem(CA)), {"ca.crt": _b64(_pem(CA))}, True, "holds ns/tls's ca.crt"),
        # Two CAs trusted side by side while one rotates: either will do.
        (_b64(_pem(OTHER, CA)), {"ca.crt": _b64(_pem(CA))}, True, "holds"),
        (_b64(_pem(OTHER)), {"ca.crt": _b64(_pem(CA))}, False, "does not hold the CA"),
        ("", {"ca.crt": _b64(_pem(CA))}, False, "has no caBundle"),
        ("not base64!", {}, False, "is not base64"),
        (_b64(b"no pem here"), {}, False, "holds no PEM certificate"),
        # No ca.crt: the serving chain's issuer, or the serving certificate itself.
        (_b64(_pem(CA)), {"tls.crt": _b64(_pem(LEAF, CA))}, True, "tls.crt"),
        (_b64(_pem(LEAF)), {"tls.crt": _b64(_pem(LEAF))}, True, "tls.crt"),
        (_b64(_pem(OTHER)), {"tls.crt": _b64(_pem(LEAF, CA))}, False, "does not hold"),
        (_b64(_pem(CA)), None, True, "not readable, not compared"),
        (_b64(_pem(CA)), {}, True, "has no ca.crt, not compared"),
    ],
)
def test_the_ca_bundle_must_hold_the_ca_the_webhook_serves_under(
    bundle: str, data: dict[str, str] | None, ok: bool, said: str
) -> None:
    verdict = bundle_verdict(bundle, "MutatingWebhookConfiguration zs", "ns/tls", data)
    assert (verdict.part, verdict.ok) == ("webhook certificate", ok)
    assert said in verdict.detail


def test_injected_annotations_are_those_the_webhook_lists() -> None:
    obj = {
        "metadata": {
            "annotations": {
                "zeroscaler.io/idle-timeout": "15m",
                "zeroscaler.io/injected": "zeroscaler.io/idle-timeout",
                "zeroscaler.io/wake-replicas": "2",  # a person's: not listed
            }
        }
    }
    assert injected(obj) == {
        "zeroscaler.io/idle-timeout": "15m",
        "zeroscaler.io/injected": "zeroscaler.io/idle-timeout",
    }
    assert injected({"metadata": {}}) == {}


def test_each_granted_access_becomes_one_review() -> None:
    rules = [
        {"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale"],
         "verbs": ["get", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"],
         "resourceNames": ["zs"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},  # repeated
    ]  # fmt: skip
    reviews = reviews_for(rules, "zeroscaler")
    assert reviews == [
        Review("get", "apps", "deployments", "zeroscaler"),
        Review("get", "apps", "deployments/scale", "zeroscaler"),
        Review("patch", "apps", "deployments", "zeroscaler"),
        Review("patch", "apps", "deployments/scale", "zeroscaler"),
        Review("update", "coordination.k8s.io", "leases", "zeroscaler", "zs"),
    ]
    assert str(reviews[-1]) == "update leases.coordination.k8s.io zs in zeroscaler"
    assert str(Review("list", "", "namespaces")) == "list namespaces cluster-wide"


def test_a_review_asks_as_the_service_account_with_its_groups() -> None:
    review = Review("patch", "apps", "deployments/scale")
    body = subject_access_review("zs-controller", "zeroscaler", review)
    spec = body["spec"]
    assert spec["user"] == "system:serviceaccount:zeroscaler:zs-controller"
    assert "system:serviceaccounts:zeroscaler" in spec["groups"]
    assert spec["resourceAttributes"] == {
        "verb": "patch", "group": "apps", "resource": "deployments", "subresource": "scale"
    }  # fmt: skip


def test_a_binding_binds_the_service_account_of_its_namespace_only() -> None:
    binding = {"subjects": [{"kind": "ServiceAccount", "name": "zs", "namespace": "zeroscaler"}]}
    assert binds(binding, "zs", "zeroscaler")
    assert not binds(binding, "zs", "other")
    assert not binds({"subjects": [{"kind": "User", "name": "zs"}]}, "zs", "zeroscaler")
    assert not binds({}, "zs", "zeroscaler")


def test_ready_endpoints_count_addresses_not_marked_unready() -> None:
    slices: list[dict[str, Any]] = [
        {"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
                       {"addresses": ["10.0.0.2"], "conditions": {"ready": False}}]},
        {"endpoints": [{"addresses": ["10.0.0.3"]}]},
        {"endpoints": None},
    ]  # fmt: skip
    assert ready_endpoints(slices) == 2
    assert ready_endpoints([]) == 0
