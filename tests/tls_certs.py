"""Throwaway certificates for 127.0.0.1/localhost, for TLS tests: a self-signed one, or a test
CA with a server and a client certificate it signs (mTLS)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOCALHOST = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


@dataclass(frozen=True)
class CertFiles:
    cert: Path  # also the CA: the certificate is self-signed
    key: Path


@dataclass(frozen=True)
class LocalPki:
    ca: Path  # signs every certificate below
    server: CertFiles  # for 127.0.0.1/localhost
    client: CertFiles  # client authentication (mTLS)
    clients: Mapping[str, CertFiles] = field(default_factory=dict)  # by CN: more clients


def self_signed_localhost(directory: Path) -> CertFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder("localhost", "localhost", key)
        .add_extension(x509.SubjectAlternativeName(LOCALHOST), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return _write(directory, "server", cert, key)


def ca_signed_localhost(
    directory: Path, clients: Mapping[str, Sequence[str]] | None = None
) -> LocalPki:
    """``clients``: more client certificates, CN -> its SAN URIs (e.g. a SPIFFE id)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        _builder("gpucap test CA", "gpucap test CA", ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName]) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(cn, "gpucap test CA", key)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return _write(directory, cn, builder.sign(ca_key, hashes.SHA256()), key)

    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return LocalPki(
        ca=ca_file,
        server=leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH, LOCALHOST),
        client=leaf("gpucap", ExtendedKeyUsageOID.CLIENT_AUTH, []),
        clients={
            cn: leaf(
                cn,
                ExtendedKeyUsageOID.CLIENT_AUTH,
                [x509.UniformResourceIdentifier(u) for u in uris],
            )
            for cn, uris in (clients or {}).items()
        },
    )


def _builder(subject: str, issuer: str, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.now(UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
    )


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> CertFiles:
    files = CertFiles(directory / f"{stem}.crt", directory / f"{stem}.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files
