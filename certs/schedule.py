"""The next step of in-process renewal, from the certificates' validity, the caBundle and `now`.

A CA rotation goes in three steps so that nothing the API server calls is ever untrusted: the new CA
joins the bundle (the serving certificate is still the old CA's), then, once every API server trusts
it, the serving certificate is reissued by the new CA, then, once every replica serves that, the old
CA leaves the bundle. "Once" is a settle time after the step was written to the Secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Action = Literal["keep", "patch-bundle", "rotate-ca", "renew-serving", "drop-old-cas"]


@dataclass(frozen=True, slots=True)
class Cert:
    """What renewal knows of one certificate: who it is, who signed it, when it is valid."""

    fingerprint: str
    signer: str  # the fingerprint of the CA in the bundle that signed it; "" when none did
    not_before: datetime
    not_after: datetime


@dataclass(frozen=True, slots=True)
class CertState:
    """The Secret's certificates and the webhook configuration's caBundles, as read just now."""

    ca: Cert  # the newest CA, whose key the Secret holds (first in its bundle)
    serving: Cert
    older_cas: tuple[Cert, ...] = ()  # the rest of the Secret's bundle
    # The CA fingerprints in each webhook's caBundle; None: no webhook configuration to keep.
    ca_bundles: Sequence[tuple[str, ...]] | None = None
    ca_since: datetime | None = None  # when the newest CA was written to the Secret
    serving_since: datetime | None = None  # when the serving pair was written to the Secret


@dataclass(frozen=True, slots=True)
class RenewalPolicy:
    """When to renew (a fraction of the lifetime) and how long a change takes to settle."""

    renew_fraction: float
    settle: timedelta


@dataclass(frozen=True, slots=True)
class Step:
    """What to do now, why, and when to decide again if nothing changes meanwhile."""

    action: Action
    reason: str
    recheck_at: datetime


def renewal_due(cert: Cert, fraction: float) -> datetime:
    """When `fraction` of the certificate's lifetime has passed."""
    return cert.not_before + (cert.not_after - cert.not_before) * fraction


def decide_renewal(seen: CertState, policy: RenewalPolicy, now: datetime) -> Step:
    """The one step to take next (at most one write per decision)."""
    bundle = (seen.ca.fingerprint, *(c.fingerprint for c in seen.older_cas))
    if seen.ca_bundles is not None and any(set(b) != set(bundle) for b in seen.ca_bundles):
        return Step("patch-bundle", "the caBundle differs from the Secret's CAs", now)
    if seen.serving.signer not in bundle:
        return Step("renew-serving", "the serving certificate is not signed by a CA in use", now)
    if seen.serving.not_after <= now:
        return Step("renew-serving", "the serving certificate has expired", now)
    if seen.serving.signer != seen.ca.fingerprint:
        ready = (seen.ca_since or seen.ca.not_before) + policy.settle
        if now >= ready:
            return Step("renew-serving", "the new CA is trusted: serve a pair it signed", now)
        return Step("keep", "waiting for every API server to trust the new CA", ready)
    if seen.older_cas:
        ready = (seen.serving_since or seen.serving.not_before) + policy.settle
        if now >= ready:
            return Step("drop-old-cas", "every replica serves the new CA's pair", now)
        return Step("keep", "waiting for every replica to serve the new pair", ready)
    ca_due = renewal_due(seen.ca, policy.renew_fraction)
    if now >= ca_due:
        return Step("rotate-ca", "the CA is past its renewal point", now)
    serving_due = renewal_due(seen.serving, policy.renew_fraction)
    if now >= serving_due:
        return Step("renew-serving", "the serving certificate is past its renewal point", now)
    return Step("keep", "current", min(ca_due, serving_due))
