"""Which client measures an ``s3://`` URL: obstore when it can, s3fs otherwise.

This is the S3 client choice; the clients themselves are :mod:`.obstore` and :mod:`.s3fs`.

``storage_options`` for ``s3://`` are s3fs's (``key``, ``secret``, ``token``, ``anon``,
``profile``, ``endpoint_url``, ``client_kwargs={"endpoint_url", "region_name"}``). Their
endpoint, region and credentials are resolved once (:func:`.s3_endpoint.resolve_s3`:
options, fsspec's configuration, the environment, the AWS profile) and handed to the
client that measures, obstore or s3fs, so both send every request to the same endpoint.
With ``client="auto"`` obstore measures when it is installed and can honour them all:

- trust: ``client_kwargs={"verify": "ca.pem" | False}`` or a CA bundle variable, handed
  to obstore as ``root_certificate`` or ``allow_invalid_certificates``
  (:mod:`.s3_trust`);
- credentials: explicit ``key`` and ``secret`` (and ``token``), or ``anon=True``, or
  else botocore's credential chain (environment, ``~/.aws`` files and ``profile``,
  SSO, instance roles) resolved when the first request is signed, as s3fs would;
- where: an endpoint, or a region (resolved as above);
- no endpoint variable only obstore would read (``AWS_ENDPOINT``, or
  ``AWS_ENDPOINT_URL`` that botocore is told to ignore), and no botocore setting only
  s3fs would apply (FIPS, dual-stack or accelerated endpoints, virtual-hosted addressing
  on a custom endpoint);
- nothing obstore has no equivalent for (``config_kwargs``, ``requester_pays``...).

Otherwise s3fs measures (it also looks up a bucket's region by itself); with
``client="obstore"`` the reason is a :class:`ConfigurationError`. obstore is the
default because on small objects the client is the limit, and obstore moves them 2–4×
faster than s3fs against the same server (``docs/benchmarks.md``).
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from fsspec.core import url_to_fs

from storeprobe.backends.base import AsyncBackend
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.backends.obstore_stores import CLIENT_TIMEOUT_S, open_store
from storeprobe.backends.registry import REGISTRY
from storeprobe.backends.s3_endpoint import CHECKSUM_SETTINGS, S3Endpoint, fsspec_defaults
from storeprobe.backends.s3fs import S3Backend
from storeprobe.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "S3_CLIENTS",
    "BotocoreCredentials",
    "open_obstore",
    "refusal",
    "s3fs_backend",
    "s3fs_options",
]

#: The clients an ``s3://`` URL can be measured through.
S3_CLIENTS = REGISTRY.choices()["s3"]  # from the client specs
# s3fs storage options whose meaning S3Endpoint carries (client_kwargs apart)
_UNDERSTOOD = frozenset({"key", "secret", "token", "endpoint_url", "anon", "profile"})
_IGNORED = frozenset({"skip_instance_cache", "use_listings_cache"})
#: how long obstore may reuse credentials from botocore before asking again
_CREDENTIAL_REUSE = dt.timedelta(minutes=5)


class BotocoreCredentials:
    """An obstore credential provider reading botocore's credential chain.

    The chain (environment, shared files and ``profile``, SSO, container and instance
    roles) is resolved when obstore first signs a request, not at construction, and
    refreshed credentials are handed over every few minutes. ``secrets`` holds the
    values handed out, so errors can be scrubbed of them.
    """

    def __init__(self, profile: str | None = None) -> None:
        self.profile = profile
        self.secrets: tuple[str, ...] = ()
        self._credentials: Any = None

    def __call__(self) -> dict[str, Any]:
        if self._credentials is None:
            import botocore.session

            session = botocore.session.Session(profile=self.profile)
            self._credentials = session.get_credentials()
            if self._credentials is None:
                raise PermissionError(
                    "no AWS credentials found: pass key and secret in storage_options, "
                    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile"
                )
        frozen = self._credentials.get_frozen_credentials()
        self.secrets = tuple(value for value in (frozen.secret_key, frozen.token) if value)
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": dt.datetime.now(dt.UTC) + _CREDENTIAL_REUSE,
        }


def _translate(
    options: Mapping[str, Any], endpoint: S3Endpoint
) -> tuple[dict[str, Any], BotocoreCredentials | None, str | None]:
    """obstore's config and credential provider for s3fs-style ``options`` whose endpoint,
    region and credentials are ``endpoint``, or why obstore cannot measure them."""
    merged = {**fsspec_defaults(), **options}
    for name, value in merged.items():
        if name in _IGNORED or name in _UNDERSTOOD:
            continue
        if name == "client_kwargs" and isinstance(value, Mapping):
            for inner in value:
                if inner not in ("endpoint_url", "region_name", "verify"):
                    return {}, None, f"client_kwargs[{inner!r}] has no obstore equivalent"
            continue
        return {}, None, f"storage option {name!r} has no obstore equivalent"
    if endpoint.unread_endpoint is not None:
        return (
            {},
            None,
            f"{endpoint.unread_endpoint} is set, which obstore would read and botocore does "
            "not, so the two clients would go to different endpoints (pass endpoint_url, "
            f"or unset {endpoint.unread_endpoint})",
        )
    if endpoint.botocore_only:
        return (
            {},
            None,
            f"{endpoint.botocore_only[0]} is a botocore setting obstore does not apply, so "
            "the two clients would not send the same requests to the same endpoint",
        )
    if endpoint.endpoint_url is None and endpoint.region is None:
        return {}, None, "neither an endpoint nor a region (s3fs looks up the bucket's region)"
    config: dict[str, Any] = {}
    if endpoint.endpoint_url is not None:
        config["endpoint"] = endpoint.endpoint_url
    if endpoint.region is not None:
        config["region"] = endpoint.region
    credentials = endpoint.credentials
    provider = None
    if credentials.kind == "anonymous":
        config["skip_signature"] = True
    elif credentials.kind == "static":
        config["access_key_id"] = credentials.access_key_id
        config["secret_access_key"] = credentials.secret_access_key
        if credentials.session_token is not None:
            config["session_token"] = credentials.session_token
    elif importlib.util.find_spec("botocore") is None:
        return {}, None, "no explicit key and secret, and botocore is not installed"
    else:
        provider = BotocoreCredentials(credentials.profile)
    return config, provider, None


def refusal(options: Mapping[str, Any], endpoint: S3Endpoint) -> str | None:
    """Why s3fs-style ``options`` cannot be measured through obstore (None: they can)."""
    if importlib.util.find_spec("obstore") is None:
        return "obstore is not installed"
    return _translate(options, endpoint)[2]


def open_obstore(
    options: Mapping[str, Any], endpoint: S3Endpoint, *, required: bool
) -> tuple[ObstoreBackend, BotocoreCredentials | None] | None:
    """An obstore backend for s3fs-style ``options`` resolved to ``endpoint`` (and its
    credential provider), or None when ``auto`` should use s3fs; with ``required`` a
    clear error instead.

    Its ranged reads fall back to s3fs, handed the same endpoint, when s3fs is installed."""
    if importlib.util.find_spec("obstore") is None:
        if required:
            raise MissingDependencyError(
                "client='obstore' needs obstore, which is not installed: "
                "pip install 'storeprobe[s3]'"
            )
        return None
    config, provider, reason = _translate(options, endpoint)
    if reason is not None:
        if required:
            raise ConfigurationError(
                f"client='obstore' cannot use these storage_options: {reason}; "
                "use client='s3fs' or pass key, secret and an endpoint_url or region_name"
            )
        return None
    extra: dict[str, Any] = {} if provider is None else {"credential_provider": provider}
    fs = open_store("s3", config, client_options=endpoint.trust.obstore_options, **extra)
    fallback: Callable[[], AsyncBackend] | None = None
    if importlib.util.find_spec("s3fs") is not None:
        fallback = functools.partial(s3fs_backend, s3fs_options(options, endpoint))
    return ObstoreBackend(fs, range_fallback=fallback), provider


def s3fs_options(options: Mapping[str, Any], endpoint: S3Endpoint) -> dict[str, Any]:
    """s3fs's storage options for ``options`` with ``endpoint``'s endpoint, region and CA
    bundle given explicitly (``client_kwargs``), so s3fs sends its requests where obstore
    would and trusts what it trusts: botocore alone would not read ``AWS_REGION``,
    ``REQUESTS_CA_BUNDLE`` or ``SSL_CERT_FILE``, nor fsspec's configuration where
    ``client_kwargs`` are given. On an endpoint that is not AWS's, with no checksum mode
    set anywhere, ``config_kwargs`` get ``when_required`` checksums (see
    :mod:`.s3_endpoint`). Unless ``config_kwargs`` name one, botocore's ``read_timeout``
    is lifted (s3fs's is 15 s) so that the probe's ``timeout`` governs, as on obstore:
    otherwise botocore resends a request whose answer takes longer, a retry the storage
    did not ask for (and one ``rclone serve s3`` cannot take for a multipart part whose
    bytes it already streamed: it fails the whole upload with ``InvalidPart``)."""
    merged = {**fsspec_defaults(), **options}
    raw = merged.get("client_kwargs")
    client = dict(raw) if isinstance(raw, Mapping) else {}
    handed = dict(options)
    if endpoint.endpoint_url is not None:
        client["endpoint_url"] = endpoint.endpoint_url
        if "endpoint_url" in merged:  # s3fs passes it beside client_kwargs: keep them equal
            handed["endpoint_url"] = endpoint.endpoint_url
    if endpoint.region is not None:
        client["region_name"] = endpoint.region
    if (verify := endpoint.trust.s3fs_verify) is not None:
        client["verify"] = verify  # the bundle obstore trusts, wherever it was named
    if client:
        handed["client_kwargs"] = client
    raw_config = merged.get("config_kwargs")
    config = dict(raw_config) if isinstance(raw_config, Mapping) else {}
    config.setdefault("read_timeout", CLIENT_TIMEOUT_S)
    if endpoint.checksums_chosen:
        for name in CHECKSUM_SETTINGS:
            config.setdefault(name, endpoint.checksums)
    handed["config_kwargs"] = config
    return handed


def s3fs_backend(options: Mapping[str, Any]) -> S3Backend:
    """An s3fs backend for the same options (s3fs must be installed)."""
    fs, _ = url_to_fs(
        "s3://", **{"skip_instance_cache": True, "use_listings_cache": False, **options}
    )
    return S3Backend(fs)
