"""In-process renewal: each webhook replica serves the TLS Secret's pair and takes renewal steps.

The Secret is the single source of truth. Each replica reads it every sync interval, writes its
serving pair to the files the server reloads from, and takes the next step `decide_renewal` names;
writes carry the Secret's resourceVersion (the caBundle patch, the configuration's), so when
replicas race one wins and the others read again.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from prometheus_client import CollectorRegistry, Counter, Gauge

from zeroscaler.api import Conflict, Invalid, Kube, KubeError, NotFound
from zeroscaler.certs.command import BUNDLE_CURRENT, WEBHOOK_CONFIGS, patch_bundle
from zeroscaler.certs.issue import CertPair, new_ca, new_serving_cert
from zeroscaler.certs.rotation import (
    CA_CERT,
    CA_KEY,
    CA_SINCE,
    SERVING_SINCE,
    TLS_CERT,
    TLS_KEY,
    decode_secret_data,
    encode_secret_data,
    names_of,
    split_bundle,
    stamp,
)
from zeroscaler.certs.schedule import Cert, CertState, RenewalPolicy, Step, decide_renewal
from zeroscaler.runtime.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RenewerConfig:
    """Where the Secret and the configuration are, where the pair goes, and how long things last."""

    namespace: str
    secret: str
    webhook_configuration: str
    cert_file: Path
    key_file: Path
    policy: RenewalPolicy
    serving_lifetime: timedelta
    ca_lifetime: timedelta
    interval: float


class Renewer:
    """Keeps the served pair equal to the Secret's and walks renewal one step at a time."""

    def __init__(
        self,
        kube: Kube,
        config: RenewerConfig,
        clock: Clock,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.kube = kube
        self.config = config
        self.clock = clock
        self._on_change: Callable[[], object] = _nothing  # what `run` is told to call
        self._secret_path = f"/api/v1/namespaces/{config.namespace}/secrets/{config.secret}"
        self.steps = Counter(
            "zeroscaler_webhook_certificate_steps_total",
            "Certificate renewal steps taken, by action",
            ["action"],
            registry=registry,
        )
        self.errors = Counter(
            "zeroscaler_webhook_certificate_sync_errors_total",
            "Certificate sync passes that failed (the API server refused or was unreachable)",
            registry=registry,
        )
        self.expiry = Gauge(
            "zeroscaler_webhook_certificate_expiry_timestamp_seconds",
            "When the serving certificate this replica serves expires (Unix time)",
            registry=registry,
        )

    async def sync_files(self) -> bool:
        """Write the Secret's serving pair to the files if it differs; False when there is none."""
        try:
            secret = await self.kube.get(self._secret_path)
        except NotFound:
            return False
        return self._write_files(decode_secret_data(secret.get("data") or {})) is not None

    async def sync(self) -> datetime:
        """One pass: serve the Secret's pair, take the next step; returns when to look again."""
        now = self.clock.now()
        # The configuration first: the caBundle only ever follows the Secret, so a Secret read
        # after it is never older than what the caBundle shows, and a patch from a replica that
        # read a stale pair fails its resourceVersion test instead of reverting the bundle.
        hooks = await self._webhooks()
        try:
            secret = await self.kube.get(self._secret_path)
        except NotFound:
            log.warning(
                "certificate Secret %s/%s not found: nothing to renew (zeroscaler certs makes it)",
                self.config.namespace,
                self.config.secret,
            )
            return now + timedelta(seconds=self.config.interval)
        data = decode_secret_data(secret.get("data") or {})
        self._write_files(data)
        seen = observe(data, secret["metadata"].get("annotations") or {}, hooks)
        if seen is None:
            log.warning(
                "certificate Secret %s holds no usable CA and serving pair", self.config.secret
            )
            return now + timedelta(seconds=self.config.interval)
        step = decide_renewal(seen, self.config.policy, now)
        if step.action == "keep":
            return step.recheck_at
        if not await self._apply(step, secret, data, now):
            return now  # another replica took this step already
        self.steps.labels(step.action).inc()
        log.info("certificate %s: %s", step.action, step.reason)
        return now  # look again at once: the next step may be due

    async def run(self, on_change: Callable[[], object]) -> None:
        """Sync until cancelled: at least every interval, sooner when a step falls due; call
        `on_change` each time the files are written."""
        self._on_change = on_change
        while True:
            try:
                recheck = await self.sync()
            except (Conflict, Invalid) as e:  # another replica wrote first: read again soon
                log.debug("certificate step lost a race: %s", e)
                recheck = self.clock.now() + timedelta(seconds=min(1.0, self.config.interval))
            except KubeError as e:
                self.errors.inc()
                log.warning("certificate sync failed: %s", e)
                recheck = self.clock.now() + timedelta(seconds=self.config.interval)
            wait = (recheck - self.clock.now()).total_seconds()
            await asyncio.sleep(max(0.0, min(wait, self.config.interval)))

    async def _webhooks(self) -> list[dict[str, Any]] | None:
        if not self.config.webhook_configuration:
            return None
        try:
            found = await self.kube.get(f"{WEBHOOK_CONFIGS}/{self.config.webhook_configuration}")
        except NotFound:
            return None
        hooks: list[dict[str, Any]] = found.get("webhooks") or []
        return hooks

    async def _apply(
        self, step: Step, secret: dict[str, Any], data: dict[str, bytes], now: datetime
    ) -> bool:
        """Take the step; False when there was nothing left to write."""
        bundle = split_bundle(data[CA_CERT])
        ca = CertPair(bundle[0], data[CA_KEY])
        stamps: dict[str, str] = {}
        if step.action == "patch-bundle":
            said = await patch_bundle(self.kube, self.config.webhook_configuration, data[CA_CERT])
            return not said.endswith(BUNDLE_CURRENT)
        if step.action == "rotate-ca":
            ca = new_ca(lifetime=self.config.ca_lifetime, now=now)
            data = {**data, CA_CERT: b"".join([ca.cert_pem, *bundle]), CA_KEY: ca.key_pem}
            stamps[CA_SINCE] = stamp(now)
        elif step.action == "renew-serving":
            hosts = names_of(data[TLS_CERT])
            serving = new_serving_cert(ca, hosts, lifetime=self.config.serving_lifetime, now=now)
            data = {**data, TLS_CERT: serving.cert_pem, TLS_KEY: serving.key_pem}
            stamps[SERVING_SINCE] = stamp(now)
        elif step.action == "drop-old-cas":
            data = {**data, CA_CERT: bundle[0]}
        meta = secret["metadata"]
        body = {
            **secret,
            "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), **stamps}},
            "data": encode_secret_data(data),
        }
        # PUT with the resourceVersion read: a replica that raced us gets a 409 and reads again.
        written = await self.kube.request("PUT", self._secret_path, body=body)
        self._write_files(decode_secret_data(written.get("data") or {}))
        return True

    def _write_files(self, data: dict[str, bytes]) -> x509.Certificate | None:
        """Make the files hold the Secret's serving pair; the certificate, or None when unusable."""
        cert_pem, key_pem = data.get(TLS_CERT), data.get(TLS_KEY)
        if not cert_pem or not key_pem:
            return None
        try:
            cert = x509.load_pem_x509_certificate(cert_pem)
        except ValueError:
            return None
        if _read(self.config.cert_file) != cert_pem or _read(self.config.key_file) != key_pem:
            # Key first, certificate last, each replaced whole: the reloader checks the pair.
            _replace(self.config.key_file, key_pem)
            _replace(self.config.cert_file, cert_pem)
            log.info("serving certificate %x written from the Secret", cert.serial_number)
            self._on_change()
        self.expiry.set(cert.not_valid_after_utc.timestamp())
        return cert


def _nothing() -> None:
    pass


def observe(
    data: dict[str, bytes], annotations: dict[str, str], hooks: list[dict[str, Any]] | None
) -> CertState | None:
    """What `decide_renewal` needs, read from the Secret's data and annotations and the webhooks."""
    try:
        cas = [x509.load_pem_x509_certificate(c) for c in split_bundle(data.get(CA_CERT, b""))]
        serving = x509.load_pem_x509_certificate(data.get(TLS_CERT, b""))
    except ValueError:
        return None
    if not cas or CA_KEY not in data:
        return None
    bundles = None
    if hooks is not None:
        bundles = [
            _bundle_fingerprints((h.get("clientConfig") or {}).get("caBundle")) for h in hooks
        ]
    return CertState(
        ca=_cert(cas[0], cas),
        serving=_cert(serving, cas),
        older_cas=tuple(_cert(c, cas) for c in cas[1:]),
        ca_bundles=bundles,
        ca_since=_parse_stamp(annotations.get(CA_SINCE)),
        serving_since=_parse_stamp(annotations.get(SERVING_SINCE)),
    )


def _cert(cert: x509.Certificate, cas: list[x509.Certificate]) -> Cert:
    signer = next((_fingerprint(ca) for ca in cas if _signed_by(cert, ca)), "")
    return Cert(_fingerprint(cert), signer, cert.not_valid_before_utc, cert.not_valid_after_utc)


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()[:16]


def _bundle_fingerprints(encoded: object) -> tuple[str, ...]:
    if not isinstance(encoded, str) or not encoded:
        return ()
    try:
        pems = split_bundle(base64.b64decode(encoded))
        return tuple(_fingerprint(x509.load_pem_x509_certificate(p)) for p in pems)
    except ValueError:
        return ("unreadable",)


def _parse_stamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _replace(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.new")
    scratch.touch(mode=0o600, exist_ok=True)
    scratch.write_bytes(content)
    os.replace(scratch, path)
