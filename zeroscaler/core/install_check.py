"""What `zeroscaler check` concludes from what it read: one verdict a part of the install.

Everything here is decided from objects as the API server returned them, and `now`: whether a
Lease is held and fresh, whether a webhook configuration's caBundle holds the CA its pods serve
under, whether a dry-run came back with zeroscaler's annotations, which access reviews prove the
RBAC the chart granted. `zeroscaler.cli.check` reads and asks; this decides.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zeroscaler.core import annotations as a
from zeroscaler.core.durations import parse_time

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One line of the check: a part, whether it passed, and what was seen."""

    part: str
    ok: bool
    detail: str

    def line(self, width: int = 20) -> str:
        return f"{'ok' if self.ok else 'FAIL':<5} {self.part:<{width}} {self.detail}"


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of `--flag=value` (or `--flag value`) in a container's args; None if absent."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def lease_verdict(lease: Mapping[str, Any] | None, name: str, now: datetime) -> Verdict:
    """Whether someone holds the Lease and renewed it within its duration."""
    if lease is None:
        return Verdict("controller leads", False, f"no Lease {name}: no controller has led yet")
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if not holder:
        return Verdict("controller leads", False, f"Lease {name} is held by nobody")
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    duration = spec.get("leaseDurationSeconds")
    if not isinstance(renewed, str) or not isinstance(duration, int):
        return Verdict(
            "controller leads", False, f"Lease {name} has no renewTime or leaseDurationSeconds"
        )
    try:
        age = (now - parse_time(renewed)).total_seconds()
    except ValueError:
        return Verdict("controller leads", False, f"Lease {name}: renewTime {renewed!r} unreadable")
    if age > duration:
        return Verdict(
            "controller leads",
            False,
            f"Lease {name}: {holder} last renewed it {age:.0f}s ago, its duration is {duration}s: "
            "no controller is leading",
        )
    return Verdict(
        "controller leads", True, f"{holder} holds Lease {name} (renewed {max(age, 0):.0f}s ago)"
    )


def certificates(pem: bytes) -> list[bytes]:
    """The DER bytes of each certificate in a PEM text (other blocks are ignored)."""
    found = []
    for body in _PEM.findall(pem):
        try:
            found.append(base64.b64decode(b"".join(body.split()), validate=True))
        except (binascii.Error, ValueError):
            continue
    return found


def bundle_verdict(
    ca_bundle: str, configuration: str, secret: str, secret_data: Mapping[str, str] | None
) -> Verdict:
    """Whether the configuration's caBundle (base64 of PEM) holds the CA of the serving Secret.

    The Secret's `ca.crt` is the CA the serving pair was issued by (the chart's certificate Job
    and cert-manager both write it); without one, the serving certificate itself is looked for.
    """
    part = "webhook certificate"
    if not ca_bundle:
        return Verdict(part, False, f"{configuration} has no caBundle: nothing can be verified")
    try:
        trusted = set(certificates(base64.b64decode(ca_bundle, validate=True)))
    except (binascii.Error, ValueError):
        return Verdict(part, False, f"the caBundle of {configuration} is not base64")
    if not trusted:
        return Verdict(part, False, f"the caBundle of {configuration} holds no PEM certificate")
    if secret_data is None:
        return Verdict(part, True, f"caBundle set; Secret {secret} not readable, not compared")
    for key in ("ca.crt", "tls.crt"):
        raw = secret_data.get(key)
        if not raw:
            continue
        try:
            served = certificates(base64.b64decode(raw, validate=True))
        except (binascii.Error, ValueError):
            return Verdict(part, False, f"Secret {secret}'s {key} is not base64")
        if key == "tls.crt":
            served = served[1:] or served  # a chain's issuers, or a self-signed certificate
        if trusted & set(served):
            return Verdict(part, True, f"the caBundle of {configuration} holds {secret}'s {key}")
        return Verdict(
            part,
            False,
            f"the caBundle of {configuration} does not hold the CA of Secret {secret} ({key}): "
            "the API server cannot verify the webhook's certificate",
        )
    return Verdict(part, True, f"caBundle set; Secret {secret} has no ca.crt, not compared")


def injected(obj: Mapping[str, Any]) -> dict[str, str]:
    """The annotations zeroscaler's webhook wrote on an object, as the dry-run returned it."""
    meta = obj.get("metadata") or {}
    found = meta.get("annotations") or {}
    listed = a.read_injected(found)
    return {k: str(found[k]) for k in [*listed, a.INJECTED] if k in found}


@dataclass(frozen=True, slots=True)
class Review:
    """One access a bound role grants: verb on group/resource, in a namespace or cluster-wide."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''}{where}"


def reviews_for(rules: Iterable[Mapping[str, Any]], namespace: str = "") -> list[Review]:
    """Each (verb, group, resource) a role's rules grant, one review each; subresources kept."""
    found: dict[Review, None] = {}
    for rule in rules:
        names = rule.get("resourceNames") or [""]
        for verb in rule.get("verbs") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    found[Review(verb, group, resource, namespace, str(names[0]))] = None
    return list(found)


def subject_access_review(service_account: str, namespace: str, review: Review) -> dict[str, Any]:
    """The SubjectAccessReview asking whether a ServiceAccount may do what `review` names."""
    resource, _, subresource = review.resource.partition("/")
    attributes: dict[str, str] = {"verb": review.verb, "group": review.group, "resource": resource}
    for key, value in (
        ("subresource", subresource),
        ("namespace", review.namespace),
        ("name", review.name),
    ):
        if value:
            attributes[key] = value
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{namespace}:{service_account}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ],
            "resourceAttributes": attributes,
        },
    }


def binds(binding: Mapping[str, Any], service_account: str, namespace: str) -> bool:
    """Whether a (Cluster)RoleBinding names this ServiceAccount among its subjects."""
    for subject in binding.get("subjects") or []:
        if (
            subject.get("kind") == "ServiceAccount"
            and subject.get("name") == service_account
            and subject.get("namespace", namespace) == namespace
        ):
            return True
    return False


def ready_endpoints(slices: Iterable[Mapping[str, Any]]) -> int:
    """Ready addresses across a Service's EndpointSlices (no condition said counts as ready)."""
    count = 0
    for s in slices:
        for endpoint in s.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready", True) is not False:
                count += len(endpoint.get("addresses") or [])
    return count
