"""Which client measures an ``s3://`` URL: obstore when it can, s3fs otherwise.

This is the S3 client choice; the clients themselves are :mod:`.obstore` and :mod:`.s3fs`.

``storage_options`` for ``s3://`` are s3fs's (``key``, ``secret``, ``token``, ``anon``,
``profile``, ``endpoint_url``, ``client_kwargs={"endpoint_url", "region_name"}``). With
``client="auto"`` they are translated to obstore's S3 store when obstore is installed
and the options say everything it needs:

- credentials: explicit ``key`` and ``secret`` (and ``token``), or ``anon=True``, or
  else botocore's credential chain (environment, ``~/.aws`` files and ``profile``,
  SSO, instance roles) resolved when the first request is signed, as s3fs would;
- where: an endpoint, or a region (the option, or the profile's / ``AWS_REGION``);
- nothing obstore has no equivalent for (``config_kwargs``, ``requester_pays``...).

Otherwise s3fs measures (it also looks up a bucket's region by itself). obstore is the
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
from storeprobe.backends.obstore_stores import open_store
from storeprobe.backends.s3fs import S3Backend
from storeprobe.errors import ConfigurationError, MissingDependencyError

__all__ = ["S3_CLIENTS", "BotocoreCredentials", "open_obstore", "refusal", "s3fs_backend"]

#: The clients an ``s3://`` URL can be measured through.
S3_CLIENTS = ("auto", "obstore", "s3fs")
# s3fs storage options obstore's S3 store understands, by name (client_kwargs apart)
_S3FS_TO_OBSTORE = {
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "endpoint_url": "endpoint",
}
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


def _profile_region(profile: str | None) -> str | None:
    """The region botocore would use for ``profile`` (files and environment, no network)."""
    import botocore.session

    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except Exception:  # an unknown profile: s3fs will say so
        return None
    return str(region) if region else None


def _translate(
    options: Mapping[str, Any],
) -> tuple[dict[str, Any], BotocoreCredentials | None, str | None]:
    """obstore's config and credential provider for s3fs-style ``options``, or why not."""
    config: dict[str, Any] = {}
    profile: str | None = None
    for name, value in options.items():
        if name in _IGNORED:
            continue
        if name == "anon":
            if value:
                config["skip_signature"] = True
        elif name == "profile":
            profile = str(value)
        elif name == "client_kwargs" and isinstance(value, Mapping):
            for inner, setting in value.items():
                if inner == "endpoint_url":
                    config["endpoint"] = setting
                elif inner == "region_name":
                    config["region"] = setting
                else:
                    return {}, None, f"client_kwargs[{inner!r}] has no obstore equivalent"
        elif name in _S3FS_TO_OBSTORE:
            config[_S3FS_TO_OBSTORE[name]] = value
        else:
            return {}, None, f"storage option {name!r} has no obstore equivalent"
    provider = None
    explicit = "access_key_id" in config and "secret_access_key" in config
    if not (explicit or config.get("skip_signature")):
        if importlib.util.find_spec("botocore") is None:
            return {}, None, "no explicit key and secret, and botocore is not installed"
        provider = BotocoreCredentials(profile)
        if "region" not in config and (region := _profile_region(profile)):
            config["region"] = region
    if "endpoint" not in config and "region" not in config:
        return {}, None, "neither an endpoint nor a region (s3fs looks up the bucket's region)"
    return config, provider, None


def refusal(options: Mapping[str, Any]) -> str | None:
    """Why s3fs-style ``options`` cannot be measured through obstore (None: they can)."""
    if importlib.util.find_spec("obstore") is None:
        return "obstore is not installed"
    return _translate(options)[2]


def open_obstore(
    options: Mapping[str, Any], *, required: bool
) -> tuple[ObstoreBackend, BotocoreCredentials | None] | None:
    """An obstore backend for s3fs-style ``options`` (and its credential provider), or
    None when ``auto`` should use s3fs; with ``required`` a clear error instead.

    Its ranged reads fall back to s3fs for the same options when s3fs is installed."""
    if importlib.util.find_spec("obstore") is None:
        if required:
            raise MissingDependencyError(
                "client='obstore' needs obstore, which is not installed: "
                "pip install 'storeprobe[s3]'"
            )
        return None
    config, provider, reason = _translate(options)
    if reason is not None:
        if required:
            raise ConfigurationError(
                f"client='obstore' cannot use these storage_options: {reason}; "
                "use client='s3fs' or pass key, secret and an endpoint_url or region_name"
            )
        return None
    extra: dict[str, Any] = {} if provider is None else {"credential_provider": provider}
    fs = open_store("s3", config, **extra)
    fallback: Callable[[], AsyncBackend] | None = None
    if importlib.util.find_spec("s3fs") is not None:
        fallback = functools.partial(s3fs_backend, dict(options))
    return ObstoreBackend(fs, range_fallback=fallback), provider


def s3fs_backend(options: Mapping[str, Any]) -> S3Backend:
    """An s3fs backend for the same options (s3fs must be installed)."""
    fs, _ = url_to_fs(
        "s3://", **{"skip_instance_cache": True, "use_listings_cache": False, **options}
    )
    return S3Backend(fs)
