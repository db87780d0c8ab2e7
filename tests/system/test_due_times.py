"""An operator with work on a clock, on the real node: cert-manager's own certificate controllers
(examples/cert-manager) renew a Certificate at its status.renewalTime from a timer in memory. It
falls due while cert-manager sleeps; zeroscaler wakes cert-manager its lead time before, and the
Certificate is renewed on time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from localcluster import realnode
from localcluster.cluster import Cluster
from testkit import cert_manager
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    events_of,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.core.durations import parse_time

pytestmark = pytest.mark.cluster

LEAD = 15  # seconds: zeroscaler.io/due-lead
KINDS = f"{cert_manager.CERTIFICATE},CertificateRequest.cert-manager.io,Issuer.cert-manager.io"


def status(api: k8s.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return dict(cert_manager.read_certificate(api, ns, name).get("status") or {})


def ready_pod(api: k8s.ApiClient, ns: str) -> bool:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        ns, label_selector=f"app.kubernetes.io/name={cert_manager.NAME}"
    )
    return any(
        p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        for p in pods.items
    )


def test_a_certificate_due_while_cert_manager_sleeps_is_renewed_on_time(
    cluster: Cluster,
    api: k8s.ApiClient,
    opted_ns: str,
    controller: ControllerProcess,
    real_node: realnode.RealNode,
) -> None:
    config = config_for(
        "5s",
        KINDS,
        watch_namespaces=opted_ns,
        owned_kinds="Secret",
        due_times=f"{cert_manager.CERTIFICATE}=status.renewalTime",
        due_lead=f"{LEAD}s",
    )
    with cert_manager.installed(cluster, api, opted_ns, annotations=config):
        with step("cert-manager is Ready"):
            ref = Ref(opted_ns, cert_manager.NAME)
            wait_for(lambda: ready_pod(api, opted_ns), "cert-manager Ready", timeout=120)
        with step("a certificate due 90 s after it is issued is issued"):
            cert_manager.self_signed_issuer(api, opted_ns)
            # Due 90 s after it is issued: 1h certificates, renewed 58m30s before they expire.
            cert_manager.certificate(api, opted_ns, "web", duration="1h", renew_before="58m30s")
            # Issued (revision 1), and its renewal time published (the readiness controller's, a
            # status write of its own).
            issued = wait_for(
                lambda: (
                    (s := status(api, opted_ns, "web")).get("revision") == 1
                    and s.get("renewalTime")
                ),
                "issued",
                timeout=120,
            )
            due = parse_time(str(issued))
        with step("cert-manager sleeps well before the due time's lead"):
            # cert-manager sleeps (its idle timeout is 5 s) well before the due time's lead.
            wait_asleep(api, ref, 1, timeout=60)
            slept = parse_time(state_of(api, ref)[1]["zeroscaler.io/asleep-since"])
            assert (due - slept).total_seconds() > LEAD
        with step("the due time wakes it, and cert-manager's own timer renews the certificate"):
            # Woken by the due time, not by a change, and renewed by cert-manager's own timer.
            woken = wait_event(api, ref, "Woken", "web status.renewalTime is due at", timeout=180)
            wait_for(
                lambda: status(api, opted_ns, "web").get("revision") == 2, "renewed", timeout=180
            )
            # The new renewal time comes in a status write of its own, after the revision's.
            renewed = wait_for(
                lambda: (
                    s
                    if (s := status(api, opted_ns, "web")).get("renewalTime") not in (None, issued)
                    else None
                ),
                f"the renewed certificate's status.renewalTime to move on from {issued}",
                timeout=60,
            )
            assert renewed.get("revision") == 2
        with step("only the due time woke it, before the certificate was due"):
            woke = [e for e in events_of(api, ref) if e.reason == "Woken"]
            assert [e.message for e in woke] == [woken.message]  # no wake but the due time's
            woken_at = woken.last_timestamp or woken.event_time
            assert woken_at is not None
            assert woken_at.astimezone(UTC) < due
            assert parse_time(renewed["renewalTime"]) > due
        with step("the figures are printed"):
            issued_at = parse_time(renewed["notBefore"])
            early = (due - woken_at.astimezone(UTC)).total_seconds()
            late = (issued_at - due).total_seconds()
            print(
                f"due-time figures: woken {early:.0f} s before renewalTime (lead {LEAD} s); "
                f"renewed certificate's notBefore {late:+.0f} s from renewalTime; "
                f"measured at {datetime.now(UTC).isoformat(timespec='seconds')}"
            )
