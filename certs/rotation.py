"""Deciding whether the webhook's CA and serving certificate need issuing or rotating."""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509

from zeroscaler.certs.issue import CertPair, expires_within, new_ca, new_serving_cert

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
_PEM_END = b"-----END CERTIFICATE-----"
# On the Secret: when its newest CA and its serving pair were written (renewal waits from these).
CA_SINCE, SERVING_SINCE = "zeroscaler.io/ca-since", "zeroscaler.io/serving-since"


@dataclass(frozen=True, slots=True)
class Material:
    """What the Secret holds: the CA pair, the serving pair, and the bundle clients trust."""

    ca: CertPair
    serving: CertPair
    bundle: bytes  # the current CA first, then older CAs still valid (so rotation drops nothing)

    def secret_data(self) -> dict[str, bytes]:
        return {
            CA_CERT: self.bundle,
            CA_KEY: self.ca.key_pem,
            TLS_CERT: self.serving.cert_pem,
            TLS_KEY: self.serving.key_pem,
        }


def plan_certificates(
    existing: Mapping[str, bytes] | None,
    hosts: Sequence[str],
    *,
    renew_before: timedelta,
    rotate_ca: bool = False,
    rotate_serving: bool = False,
    now: datetime,
) -> tuple[Material, str | None]:
    """The material to store and why it changed (None: keep `existing` as it is), at `now`."""
    found = _read(existing)
    if found is None:
        ca = new_ca(now=now)
        return Material(ca, new_serving_cert(ca, list(hosts), now=now), ca.cert_pem), "issued"
    ca, serving, bundle = found
    if rotate_ca or expires_within(ca.cert_pem, renew_before, now=now):
        fresh = new_ca(now=now)
        kept = [c for c in split_bundle(bundle) if not expires_within(c, timedelta(0), now=now)]
        new_bundle = b"".join([fresh.cert_pem, *kept])
        return Material(fresh, new_serving_cert(fresh, list(hosts), now=now), new_bundle), (
            "CA rotated"
        )
    if rotate_serving or expires_within(serving.cert_pem, renew_before, now=now):
        return Material(ca, new_serving_cert(ca, list(hosts), now=now), bundle), "serving rotated"
    if sorted(names_of(serving.cert_pem)) != sorted(set(hosts)):
        return Material(ca, new_serving_cert(ca, list(hosts), now=now), bundle), "hosts changed"
    return Material(ca, serving, bundle), None


def stamp(now: datetime) -> str:
    """An RFC 3339 UTC time with milliseconds, for the Secret's annotations."""
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stamps_for(why: str, now: datetime) -> dict[str, str]:
    """The annotations a change of this kind (from `plan_certificates`) sets."""
    if why in ("issued", "CA rotated"):
        return {CA_SINCE: stamp(now), SERVING_SINCE: stamp(now)}
    return {SERVING_SINCE: stamp(now)}


def split_bundle(bundle: bytes) -> list[bytes]:
    """The PEM certificates in a bundle, each ending with its END line and a newline."""
    parts = [p.strip() for p in bundle.split(_PEM_END) if p.strip()]
    return [p + b"\n" + _PEM_END + b"\n" for p in parts]


def decode_secret_data(data: Mapping[str, str]) -> dict[str, bytes]:
    """A Secret's `data` decoded; a value that is not base64 is left out, read as absent."""
    out: dict[str, bytes] = {}
    for k, v in data.items():
        try:
            out[k] = base64.b64decode(v)
        except ValueError:
            continue
    return out


def encode_secret_data(data: Mapping[str, bytes]) -> dict[str, str]:
    """Bytes as a Secret's `data` holds them: base64 text."""
    return {k: base64.b64encode(v).decode() for k, v in data.items()}


def _read(existing: Mapping[str, bytes] | None) -> tuple[CertPair, CertPair, bytes] | None:
    if not existing or any(k not in existing for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)):
        return None
    bundle = existing[CA_CERT]
    certs = split_bundle(bundle)
    if not certs:
        return None
    try:
        ca = CertPair(certs[0], existing[CA_KEY])
        serving = CertPair(existing[TLS_CERT], existing[TLS_KEY])
        ca.cert, serving.cert  # noqa: B018  (parse both, so garbage counts as absent)
    except ValueError:
        return None
    return ca, serving, bundle


def names_of(cert_pem: bytes) -> list[str]:
    """The DNS names and IP addresses a certificate is for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names = [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    names += sans.get_values_for_type(x509.DNSName)
    return [str(ipaddress.ip_address(n)) if _is_ip(n) else n for n in names]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
