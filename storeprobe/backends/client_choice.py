"""Which client measures a URL whose protocol has two: ``s3://``, ``gs://``, Azure Blob.

One table, :data:`CLIENTS`, says which clients each protocol can be measured through
(read from the client specs in :data:`~storeprobe.backends.registry.REGISTRY`);
:func:`choose_client` picks one from ``client=`` and the storage options, and says why.
Each protocol's own choice and options translation is in its module:
:mod:`.s3_choice` (obstore or s3fs), :mod:`.gcs_choice` (gcsfs or obstore),
:mod:`.azure_choice` (obstore or adlfs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from storeprobe.backends.azure_choice import choose_azure
from storeprobe.backends.gcs_choice import choose_gcs
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.backends.registry import REGISTRY
from storeprobe.backends.s3_choice import S3_CLIENTS, open_obstore, refusal, s3fs_options
from storeprobe.backends.s3_endpoint import S3Endpoint, resolve_s3
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice

__all__ = ["CLIENTS", "Chosen", "choose_client"]

#: The clients a URL of each protocol can be measured through (``client=``); a protocol
#: not listed has one, and takes only ``client="auto"``.
CLIENTS: dict[str, tuple[str, ...]] = REGISTRY.choices()
_AZURE = frozenset({"abfs", "abfss", "az"})


@frozen(kw_only=True)
class Chosen:
    """The client picked for a URL: an obstore backend, or None for the protocol's fsspec
    implementation; why (it reads after "measured through CLIENT: "); and, for S3
    credentials botocore resolves later, where their secret values can be read."""

    backend: ObstoreBackend | None
    reason: str
    secrets: Callable[[], tuple[str, ...]] | None = None
    #: for S3: where every request goes, in which region, signed how (resolved once)
    endpoint: S3Endpoint | None = None
    #: the options to open the protocol's fsspec implementation with, where they differ
    #: from the caller's (for s3fs: the resolved endpoint and region given explicitly)
    storage_options: Mapping[str, Any] | None = None
    #: a ``client-fallback`` warning when ``client="auto"`` could not use obstore, the
    #: default, and another client measures
    notice: Notice | None = None


def _fallback(
    protocol: str,
    client: str,
    reason: str,
    endpoint: S3Endpoint | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Chosen:
    spec = REGISTRY.default(protocol)
    default = "obstore" if spec is None else spec.name
    notice = Notice(
        code=Code.CLIENT_FALLBACK,
        message=f"measured through {client}, not {default} (the default for {protocol}://): "
        f"{reason}",
        fix=f"on small objects the client can be the limit: pass options {default} takes "
        f"(see the Backends page) to measure through it, or client='{client}' to choose "
        f"{client}",
    )
    return Chosen(
        backend=None,
        reason=reason,
        notice=notice,
        endpoint=endpoint,
        storage_options=storage_options,
    )


def choose_client(protocol: str, options: Mapping[str, Any], client: str) -> Chosen:
    """The client for a ``protocol://`` URL with these storage ``options`` (see the
    module docstring); a clear :class:`ConfigurationError` for a client the protocol
    has not, or options the asked client cannot take."""
    choices = CLIENTS.get(protocol)
    if choices is None:
        if client == "auto":
            return Chosen(backend=None, reason="")
        if any(client in names for names in CLIENTS.values()):
            raise ConfigurationError(
                f"client={client!r} chooses between the clients of s3://, gs:// and Azure "
                f"URLs; {protocol}:// URLs have one implementation: leave client at 'auto'"
            )
        choices = S3_CLIENTS
    if client not in choices:
        scope = "" if choices == S3_CLIENTS else f" for {protocol}://"
        raise ConfigurationError(
            f"client must be one of {', '.join(choices)}{scope}, not {client!r}"
        )
    if protocol in _AZURE:
        azure, reason = choose_azure(protocol, options, client)
        if azure is None and client == "auto":
            return _fallback(protocol, "adlfs", reason)
        return Chosen(backend=azure, reason=reason)
    if protocol in ("gs", "gcs"):
        gcs, reason = choose_gcs(options, client)
        return Chosen(backend=gcs, reason=reason)
    endpoint = resolve_s3(options)
    handed = s3fs_options(options, endpoint)
    if client == "s3fs":
        return Chosen(
            backend=None,
            reason="client='s3fs' was asked",
            endpoint=endpoint,
            storage_options=handed,
        )
    opened = open_obstore(options, endpoint, required=client == "obstore")
    if opened is None:
        why = refusal(options, endpoint) or "the options do not translate"
        return _fallback(protocol, "s3fs", why, endpoint, handed)
    backend, credentials = opened
    return Chosen(
        backend=backend,
        reason="client='obstore' was asked" if client == "obstore" else "the default",
        secrets=None if credentials is None else lambda: credentials.secrets,
        endpoint=endpoint,
    )
