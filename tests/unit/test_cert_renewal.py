"""The next step of in-process certificate renewal, decided from validity, caBundle and `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from pydantic_settings import CliApp

from zeroscaler.certs.schedule import Cert, CertState, RenewalPolicy, Step, decide_renewal
from zeroscaler.webhook.settings import WebhookSettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
POLICY = RenewalPolicy(renew_fraction=0.5, settle=timedelta(minutes=1))

OLD_CA = Cert("old", "old", T0 - 100 * DAY, T0 + 100 * DAY)  # due at T0
CA = Cert("ca", "ca", T0, T0 + 100 * DAY)  # due at T0 + 50 days
SERVING = Cert("leaf", "ca", T0, T0 + 10 * DAY)  # due at T0 + 5 days
OLD_SERVING = Cert("old-leaf", "old", T0, T0 + 10 * DAY)


def at(days: float = 0, minutes: float = 0) -> datetime:
    return T0 + timedelta(days=days, minutes=minutes)


@pytest.mark.parametrize(
    ("seen", "now", "want"),
    [
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("ca",)]),
            at(1),
            Step("keep", "current", at(5)),
            id="current-recheck-at-serving-renewal",
        ),
        pytest.param(
            CertState(CA, SERVING),
            at(1),
            Step("keep", "current", at(5)),
            id="no-webhook-configuration",
        ),
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("ca",)]),
            at(5),
            Step("renew-serving", "the serving certificate is past its renewal point", at(5)),
            id="serving-renewal-point",
        ),
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("ca",)]),
            at(11),
            Step("renew-serving", "the serving certificate has expired", at(11)),
            id="serving-expired",
        ),
        pytest.param(
            CertState(CA, Cert("leaf", "stranger", T0, T0 + 10 * DAY), ca_bundles=[("ca",)]),
            at(1),
            Step("renew-serving", "the serving certificate is not signed by a CA in use", at(1)),
            id="serving-from-a-foreign-ca",
        ),
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("other",)]),
            at(1),
            Step("patch-bundle", "the caBundle differs from the Secret's CAs", at(1)),
            id="drifted-bundle",
        ),
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("ca",), ()]),
            at(1),
            Step("patch-bundle", "the caBundle differs from the Secret's CAs", at(1)),
            id="one-webhook-without-a-bundle",
        ),
        pytest.param(
            CertState(CA, SERVING, ca_bundles=[("ca", "old")]),
            at(1),
            Step("patch-bundle", "the caBundle differs from the Secret's CAs", at(1)),
            id="bundle-keeps-a-ca-the-secret-dropped",
        ),
        pytest.param(
            CertState(OLD_CA, OLD_SERVING, ca_bundles=[("old",)]),
            at(0),
            Step("rotate-ca", "the CA is past its renewal point", at(0)),
            id="ca-renewal-point-before-serving",
        ),
        pytest.param(
            CertState(CA, OLD_SERVING, (OLD_CA,), [("old",)], ca_since=at(0)),
            at(0),
            Step("patch-bundle", "the caBundle differs from the Secret's CAs", at(0)),
            id="new-ca-joins-the-bundle",
        ),
        pytest.param(
            CertState(CA, OLD_SERVING, (OLD_CA,), [("old", "ca")], ca_since=at(0)),
            at(minutes=0.5),
            Step("keep", "waiting for every API server to trust the new CA", at(minutes=1)),
            id="new-ca-settling",
        ),
        pytest.param(
            CertState(CA, OLD_SERVING, (OLD_CA,), [("ca", "old")], ca_since=at(0)),
            at(minutes=1),
            Step("renew-serving", "the new CA is trusted: serve a pair it signed", at(minutes=1)),
            id="new-ca-settled",
        ),
        pytest.param(
            CertState(CA, OLD_SERVING, (OLD_CA,), [("ca", "old")]),
            at(minutes=1),
            Step("renew-serving", "the new CA is trusted: serve a pair it signed", at(minutes=1)),
            id="no-stamp-counts-from-the-ca-start",
        ),
        pytest.param(
            CertState(CA, SERVING, (OLD_CA,), [("ca", "old")], at(0), at(minutes=1)),
            at(minutes=1.5),
            Step("keep", "waiting for every replica to serve the new pair", at(minutes=2)),
            id="new-pair-settling",
        ),
        pytest.param(
            CertState(CA, SERVING, (OLD_CA,), [("ca", "old")], at(0), at(minutes=1)),
            at(minutes=2),
            Step("drop-old-cas", "every replica serves the new CA's pair", at(minutes=2)),
            id="new-pair-settled",
        ),
        pytest.param(
            CertState(CA, SERVING, (), [("ca", "old")], at(0), at(minutes=1)),
            at(minutes=2),
            Step("patch-bundle", "the caBundle differs from the Secret's CAs", at(minutes=2)),
            id="old-ca-leaves-the-bundle",
        ),
        pytest.param(
            CertState(CA, Cert("leaf", "ca", T0, T0 + 200 * DAY), ca_bundles=[("ca",)]),
            at(10),
            Step("keep", "current", at(50)),
            id="recheck-at-ca-renewal",
        ),
    ],
)
def test_each_renewal_state_takes_its_one_next_step_or_says_when_to_look(
    seen: CertState, now: datetime, want: Step
) -> None:
    assert decide_renewal(seen, POLICY, now) == want


def test_a_full_ca_rotation_never_leaves_the_serving_ca_out_of_the_bundle() -> None:
    """Walk the steps as a renewer would, applying each one, and check trust after every step."""
    secret = [OLD_CA]  # newest first
    serving = OLD_SERVING
    config: tuple[str, ...] = ("old",)
    ca_since = serving_since = None
    now, steps = at(0), []
    for _ in range(10):
        seen = CertState(secret[0], serving, tuple(secret[1:]), [config], ca_since, serving_since)
        step = decide_renewal(seen, POLICY, now)
        steps.append(step.action)
        if step.action == "keep":
            if step.reason == "current":
                break
            now = step.recheck_at
        elif step.action == "rotate-ca":
            secret, ca_since = [CA, *secret], now
        elif step.action == "patch-bundle":
            config = tuple(c.fingerprint for c in secret)
        elif step.action == "renew-serving":
            serving, serving_since = SERVING, now
        elif step.action == "drop-old-cas":
            secret = secret[:1]
        assert serving.signer in config  # the API server always trusts what is served
    assert steps == [
        "rotate-ca",
        "patch-bundle",
        "keep",
        "renew-serving",
        "keep",
        "drop-old-cas",
        "patch-bundle",
        "keep",
    ]
    assert config == ("ca",)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--cert-sync-interval", "10", "--cert-settle", "15"],
            "at least twice cert_sync_interval",
        ),
        (["--cert-ca-lifetime", "2m", "--cert-settle", "60"], "three cert_settle times"),
        (["--cert-serving-lifetime", "a year"], "is not"),
    ],
)
def test_renewal_settings_that_cannot_work_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CliApp.run(WebhookSettings, cli_args=flags)


def test_renewal_lifetimes_are_durations() -> None:
    settings = CliApp.run(WebhookSettings, cli_args=["--cert-serving-lifetime", "720h"])
    assert settings.cert_serving_lifetime == 720 * 3600
