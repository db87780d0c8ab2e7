"""When the webhook's certificates are issued, kept, or rotated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography import x509

from zeroscaler.certs.rotation import (
    CA_CERT,
    CA_KEY,
    TLS_CERT,
    decode_secret_data,
    encode_secret_data,
    plan_certificates,
    split_bundle,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOSTS = ["svc.ns.svc", "127.0.0.1"]
MONTH = timedelta(days=30)


def test_a_missing_secret_is_issued_and_a_valid_one_is_kept_as_it_is() -> None:
    material, why = plan_certificates(None, HOSTS, renew_before=MONTH, now=T0)
    assert why == "issued"
    data = material.secret_data()
    again, why2 = plan_certificates(data, HOSTS, renew_before=MONTH, now=T0 + timedelta(days=1))
    assert why2 is None
    assert again.secret_data() == data
    serving = x509.load_pem_x509_certificate(data[TLS_CERT])
    assert serving.issuer == x509.load_pem_x509_certificate(data[CA_CERT]).subject


def test_serving_rotates_near_expiry_with_the_same_ca() -> None:
    data = plan_certificates(None, HOSTS, renew_before=MONTH, now=T0)[0].secret_data()
    later = T0 + timedelta(days=340)  # serving certificates last 365 days
    material, why = plan_certificates(data, HOSTS, renew_before=MONTH, now=later)
    assert why == "serving rotated"
    assert material.bundle == data[CA_CERT]
    assert material.serving.cert_pem != data[TLS_CERT]


def test_forced_ca_rotation_keeps_the_old_ca_trusted() -> None:
    data = plan_certificates(None, HOSTS, renew_before=MONTH, now=T0)[0].secret_data()
    material, why = plan_certificates(data, HOSTS, renew_before=MONTH, rotate_ca=True, now=T0)
    assert why == "CA rotated"
    bundle = split_bundle(material.bundle)
    assert len(bundle) == 2
    assert bundle[1] == data[CA_CERT]
    assert material.ca.key_pem != data[CA_KEY]


def test_hosts_change_or_garbage() -> None:
    data = plan_certificates(None, HOSTS, renew_before=MONTH, now=T0)[0].secret_data()
    assert plan_certificates(data, ["other.svc"], renew_before=MONTH, now=T0)[1] == "hosts changed"
    broken = {**data, TLS_CERT: b"not a certificate"}
    assert plan_certificates(broken, HOSTS, renew_before=MONTH, now=T0)[1] == "issued"
    assert plan_certificates({CA_CERT: data[CA_CERT]}, HOSTS, renew_before=MONTH, now=T0)[1] == (
        "issued"
    )


def test_secret_data_reads_back_as_written_and_a_value_not_base64_reads_as_absent() -> None:
    data = {"tls.crt": b"-----BEGIN CERTIFICATE-----\n", "tls.key": b"\x00\xff"}
    assert decode_secret_data(encode_secret_data(data)) == data
    assert decode_secret_data({"tls.crt": "Zm9v", "tls.key": "not base64!"}) == {"tls.crt": b"foo"}
