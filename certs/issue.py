"""Issue a CA and serving certificates signed by it, with `cryptography`."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True, slots=True)
class CertPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write `<stem>.crt` and `<stem>.key` (mode 0600) and return their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        key_path.touch(mode=0o600, exist_ok=True)
        key_path.write_bytes(self.key_pem)
        cert_path.write_bytes(self.cert_pem)
        return cert_path, key_path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_rsa_key_pem(bits: int = 2048) -> bytes:
    """A fresh RSA private key (for signing ServiceAccount tokens)."""
    return _key_pem(rsa.generate_private_key(public_exponent=65537, key_size=bits))


def public_key_pem(key_pem: bytes) -> bytes:
    """The PEM public key of a PEM private key."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


BACKDATE = timedelta(minutes=5)  # tolerate clocks a little behind the issuer's


def _start(now: datetime | None, lifetime: timedelta) -> datetime:
    # Peers check a certificate's validity by their OS clocks: unless told, it starts by the OS's.
    return (now or datetime.now(UTC)) - backdate_for(lifetime)


def backdate_for(lifetime: timedelta) -> timedelta:
    """How far before `now` a certificate of this lifetime starts (a twentieth for short ones)."""
    return min(BACKDATE, lifetime / 20)


def new_ca(
    common_name: str = "zeroscaler-ca",
    *,
    days: int = 3650,
    now: datetime | None = None,
    lifetime: timedelta | None = None,
) -> CertPair:
    """A self-signed CA certificate with a P-256 key, valid `days` (or `lifetime`)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    lifetime = lifetime or timedelta(days=days)
    start = _start(now, lifetime)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_serving_cert(
    ca: CertPair,
    hosts: list[str],
    *,
    days: int = 365,
    now: datetime | None = None,
    client: bool = False,
    organization: str | None = None,
    lifetime: timedelta | None = None,
) -> CertPair:
    """A leaf certificate for `hosts` (DNS names or IP addresses) signed by `ca`."""
    ca_cert = ca.cert
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise TypeError("the CA key must be EC or RSA")
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "zeroscaler")]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    lifetime = lifetime or timedelta(days=days)
    start = _start(now, lifetime)
    usage = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + lifetime)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def expires_within(cert_pem: bytes, window: timedelta, *, now: datetime) -> bool:
    """Whether a certificate expires within `window` of `now` (rotation is due)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc - window <= now
