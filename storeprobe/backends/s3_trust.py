"""Which certificates an ``https://`` S3 endpoint is checked against: resolved once.

:func:`resolve_trust` reads s3fs's ``client_kwargs={"verify": ...}`` and the environment
and returns one frozen :class:`S3Trust`, which both clients are handed: s3fs as
``client_kwargs["verify"]``, obstore as ``client_options`` (``root_certificate``, the
PEM text, or ``allow_invalid_certificates``). So the client that measures, and the s3fs
that reads ranges for obstore, trust the same certificates.

In this order, the first found wins:

- ``client_kwargs.verify`` (an argument or fsspec's configuration): a path to a PEM
  bundle of CA certificates, or ``False`` to skip verification (a
  ``tls-unverified`` notice on every Result); ``True`` is the clients' default;
- ``AWS_CA_BUNDLE`` (botocore's variable; the profile's ``ca_bundle`` is not read);
- ``REQUESTS_CA_BUNDLE`` and then ``SSL_CERT_FILE``: botocore does not read the first
  and obstore (reqwest with rustls) reads neither, so storeprobe hands the bundle they
  name to both clients itself;
- else each client's default roots (botocore's bundle; obstore's built-in web roots).

Both clients *add* a bundle to their default roots (obstore documents it for
``root_certificate``; aiobotocore loads it into a default SSL context), so a bundle of
the system's roots (``AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt``, common on
managed machines) changes nothing for public endpoints. A bundle is read when the target
is opened (local I/O, no network); a missing file or one without a PEM certificate is a
:class:`ConfigurationError` naming where it was set.

Azure Blob through obstore reads ``SSL_CERT_FILE`` alone (:data:`AZURE_CA_VARIABLES`):
the one variable adlfs (aiohttp) honours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice

__all__ = ["AZURE_CA_VARIABLES", "CA_VARIABLES", "S3Trust", "resolve_trust"]

#: environment variables naming a CA bundle, in the order they are read
CA_VARIABLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
_PEM_MARK = "-----BEGIN CERTIFICATE-----"
#: the variable naming a CA bundle for Azure: adlfs's aiohttp reads it through OpenSSL's
#: defaults, and storeprobe hands its bundle to obstore's Azure store
AZURE_CA_VARIABLES = ("SSL_CERT_FILE",)
#: what a TLS error's message says to do (see :func:`storeprobe.target.translate_error`)
TLS_FIX = (
    "give the CA that signed the server's certificate with storage option "
    "client_kwargs={'verify': 'ca.pem'} (or AWS_CA_BUNDLE=ca.pem) for s3://, "
    "SSL_CERT_FILE=ca.pem for Azure and gs:// (set before the process starts); or skip "
    "verification on s3:// with client_kwargs={'verify': False}"
)


@frozen(kw_only=True)
class S3Trust:
    """The certificates an S3 endpoint is checked against, and where that was set."""

    #: False: certificates are not checked at all
    verify: bool = True
    #: the PEM bundle added to the clients' default roots (None: the defaults alone)
    ca_bundle: str | None = None
    #: where the setting was read ("argument client_kwargs.verify", "env AWS_CA_BUNDLE")
    source: str = "the clients' default roots"
    #: the bundle's text, read when resolved
    pem: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        """One line: what is trusted, and where that was set."""
        if not self.verify:
            return f"certificates not verified ({self.source})"
        if self.ca_bundle is None:
            return self.source
        return f"CA bundle {self.ca_bundle} ({self.source})"

    @property
    def obstore_options(self) -> dict[str, Any]:
        """obstore's ``client_options`` for this trust."""
        if not self.verify:
            return {"allow_invalid_certificates": True}
        return {} if self.pem is None else {"root_certificate": self.pem}

    @property
    def s3fs_verify(self) -> str | bool | None:
        """s3fs's ``client_kwargs["verify"]`` (None: leave botocore's default)."""
        if not self.verify:
            return False
        return self.ca_bundle

    @property
    def notice(self) -> Notice | None:
        """A ``tls-unverified`` warning when certificates are not checked."""
        if self.verify:
            return None
        return Notice(
            code=Code.TLS_UNVERIFIED,
            message=f"the server's TLS certificate was not verified ({self.source})",
            fix="give the server's CA with client_kwargs={'verify': 'ca.pem'} to measure "
            "what a verified connection costs",
        )


def _bundle(path: str, source: str) -> S3Trust:
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigurationError(
            f"the CA bundle {path!r} ({source}) cannot be read ({exc.strerror or exc}): "
            "give the path of a PEM file of CA certificates"
        ) from None
    if _PEM_MARK not in text:
        raise ConfigurationError(
            f"the CA bundle {path!r} ({source}) holds no PEM certificate ({_PEM_MARK}): "
            "give a PEM file of CA certificates"
        )
    return S3Trust(ca_bundle=str(file), source=source, pem=text)


def resolve_trust(
    client: Mapping[str, Any],
    where: str,
    environ: Mapping[str, str] | None = None,
    variables: tuple[str, ...] = CA_VARIABLES,
) -> S3Trust:
    """The trust that ``client`` (s3fs's merged ``client_kwargs``, whose ``verify`` was
    read from ``where``) and the environment's ``variables`` name (see the module
    docstring). For Azure: ``resolve_trust({}, "", variables=AZURE_CA_VARIABLES)``."""
    environ = os.environ if environ is None else environ
    if "verify" in client:
        verify = client["verify"]
        if verify is False:
            return S3Trust(verify=False, source=where)
        if verify is True or verify is None:
            return S3Trust(source=f"{where}=True: the clients' default roots")
        if isinstance(verify, str | os.PathLike) and str(verify):
            return _bundle(os.fspath(verify), where)
        raise ConfigurationError(
            f"client_kwargs['verify'] must be a path to a PEM CA bundle, True or False, "
            f"not {type(verify).__name__}"
        )
    for variable in variables:
        value = environ.get(variable, "").strip()
        if value:
            return _bundle(value, f"env {variable}")
    return S3Trust()
