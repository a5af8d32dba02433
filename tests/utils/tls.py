"""A self-signed certificate for 127.0.0.1 (or a DNS name), made for a test (cryptography, else
openssl)."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest


def self_signed(directory: Path, dns_name: Optional[str] = None) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (for `dns_name` only, when given) and its key, as PEM files."""
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    try:
        _make_with_cryptography(cert_path, key_path, dns_name)
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("making a test certificate needs the cryptography package or openssl")
        _make_with_openssl(cert_path, key_path, dns_name)
    return cert_path, key_path


def _make_with_openssl(cert_path: Path, key_path: Path, dns_name: Optional[str]) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key_path),
            "-out",
            str(cert_path),
            "-days",
            "1",
            "-subj",
            "/CN=dpp-netapp test",
            "-addext",
            f"subjectAltName=DNS:{dns_name}" if dns_name else "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )


def _make_with_cryptography(cert_path: Path, key_path: Path, dns_name: Optional[str]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.DNSName(dns_name) if dns_name else x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dpp-netapp test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([subject]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
