"""Certificates for TLS tests: a CA made per test session, and a server certificate it signs.

Made with the ``openssl`` command line, as ``docs/backends.md`` shows: a CA certificate
(``CA:TRUE``) and a server certificate for ``IP:127.0.0.1`` signed by it
(``CA:FALSE``). rustls (obstore) refuses a self-signed certificate that is its own CA
(``CaUsedAsEndEntity``), so the server's certificate is never the CA's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from attrs import frozen

__all__ = ["Certificates", "make_certificates"]


@frozen(kw_only=True)
class Certificates:
    """A CA's certificate (``ca``: what clients trust) and a server's certificate and key."""

    ca: Path
    cert: Path
    key: Path


def _openssl(*argv: str) -> None:
    subprocess.run(["openssl", *argv], check=True, capture_output=True)


def make_certificates(folder: Path, name: str = "storeprobe test CA") -> Certificates:
    """A new CA in ``folder`` and a certificate for 127.0.0.1 signed by it."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca-key.pem"
    cert, key, request = folder / "cert.pem", folder / "key.pem", folder / "server.csr"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(ca_key), "-out", str(ca), "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
        "-subj", "/CN=127.0.0.1",
    )  # fmt: skip
    extensions = folder / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions),
    )  # fmt: skip
    return Certificates(ca=ca, cert=cert, key=key)
