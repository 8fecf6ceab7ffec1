"""Keep secrets out of everything storeprobe shows or writes.

Options are shown by allow-list: only names known to be harmless keep their value;
every other option is shown as ``"***"``. Secret values are also scrubbed from any
text (such as a backend's error message) before it is stored or raised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SAFE_OPTIONS",
    "redact_options",
    "redact_url",
    "scrub",
    "scrub_patterns",
    "secret_values",
]

REDACTED = "***"

#: Option names whose values are shown as they are; all others are redacted.
SAFE_OPTIONS = frozenset(
    {
        "account_name",
        "anon",
        "auto_mkdir",
        "bucket",
        "client_kwargs",
        "default_block_size",
        "default_cache_type",
        "default_fill_cache",
        "endpoint_url",
        "host",
        "max_concurrency",
        "port",
        "project",
        "region",
        "region_name",
        "requester_pays",
        "skip_instance_cache",
        "use_listings_cache",
        "use_ssl",
        "username",
        "version_aware",
    }
)
_SAFE_NESTED = frozenset(
    {"endpoint_url", "region_name", "verify", "connect_timeout", "read_timeout"}
)
_MIN_SECRET = 4


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` with every value outside :data:`SAFE_OPTIONS` replaced by ***."""
    shown: dict[str, Any] = {}
    for name, value in options.items():
        if name not in SAFE_OPTIONS:
            shown[name] = REDACTED
        elif isinstance(value, Mapping):
            shown[name] = {
                key: (item if key in _SAFE_NESTED and not isinstance(item, Mapping) else REDACTED)
                for key, item in value.items()
            }
        elif isinstance(value, str | int | float | bool) or value is None:
            shown[name] = value
        else:
            shown[name] = REDACTED
    return shown


def secret_values(options: Mapping[str, Any]) -> tuple[str, ...]:
    """Every string value inside ``options`` that is not shown by :func:`redact_options`."""
    found: list[str] = []

    def walk(value: Any, safe: bool) -> None:
        if isinstance(value, str):
            if not safe and len(value) >= _MIN_SECRET:
                found.append(value)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, safe and key in _SAFE_NESTED)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                walk(item, safe)

    for name, value in options.items():
        walk(value, name in SAFE_OPTIONS)
    return tuple(sorted(set(found), key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret in ``text`` with ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_url(url: str) -> str:
    """``url`` without user, password, query string or fragment.

    ``sftp://user:pw@host/dir`` → ``sftp://host/dir``; ``s3://bucket/x?token=t`` →
    ``s3://bucket/x``.

    A URL too malformed to parse (a port that is not a number, an unclosed ``[``) keeps
    its host text as written, without user or password: redaction never raises, so the
    error that names such a URL can show it.
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 address keeps its brackets
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:  # nothing before the last "@" is shown: it may hold a password
        scheme, _, rest = url.partition("://")
        shown = rest.rpartition("@")[2].split("?")[0].split("#")[0]
        return f"{scheme}://{shown}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


_CREDENTIAL_IN_TEXT = re.compile(r"(?i)(AccountKey|SharedAccessSignature|sig|password)=[^;&\s]+")


def scrub_patterns(text: str) -> str:
    """Redact well-known credential patterns (``AccountKey=...``, ``sig=...``) in ``text``."""
    return _CREDENTIAL_IN_TEXT.sub(lambda match: f"{match[1]}={REDACTED}", text)
