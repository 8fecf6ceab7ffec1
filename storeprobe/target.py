"""Where to probe: an fsspec filesystem, a root path, and everything that keeps it safe.

A :class:`Target` owns

- the run prefix ``<root>/storeprobe-<utc>-<random>``, fresh for every probe run;
- the switches that keep fsspec's caches out of a measurement (a new filesystem
  instance, no listings cache);
- redaction: the URL and options it shows never carry a secret, and backend errors are
  scrubbed of secret values before they are stored or raised;
- translation of backend errors into storeprobe's :mod:`~storeprobe.errors` tree.

Why one module (~440 lines): a Target's safety (the fresh prefix, the cache switches,
redaction, the error translation that scrubs secrets) is one promise (docs/safety.md),
and the URL parsing that builds a Target decides which of them apply; split, a reader
checking "never print a credential" would follow it across files.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import fsspec
from attrs import define, field
from fsspec.core import split_protocol, url_to_fs
from fsspec.registry import known_implementations

from storeprobe.backends import REGISTRY, AsyncBackend, SyncBackend, backend_for
from storeprobe.backends.client_choice import choose_client
from storeprobe.backends.codes import codes_of
from storeprobe.backends.s3_endpoint import S3Endpoint
from storeprobe.backends.s3_trust import TLS_FIX
from storeprobe.environment import endpoint_of
from storeprobe.errors import (
    ConfigurationError,
    MissingDependencyError,
    StoreProbeError,
    TargetError,
    TargetNotFoundError,
    TargetPermissionError,
    TargetUnreachableError,
)
from storeprobe.notices import Notice
from storeprobe.redaction import redact_options, redact_url, scrub, scrub_patterns, secret_values

__all__ = ["EXTRAS", "Recipe", "Target", "describe_error", "translate_error"]


#: The storeprobe extra that installs the fsspec implementation of each protocol (from
#: the client specs: :data:`storeprobe.backends.REGISTRY`).
EXTRAS: dict[str, str] = REGISTRY.extras()
_UNREACHABLE_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ClientConnectorError",
        "ClientConnectionError",
        "ServerDisconnectedError",
        "ConnectionClosedError",
        "gaierror",
    }
)
_BRACKETED = re.compile(r"\[[^\]]*\]")  # an IPv6 host such as [::1]
_MALFORMED = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(?!//)(?![A-Za-z]:)\S")
# codes (storeprobe.backends.codes) that say what is wrong, whichever client gave them
_MISSING_CODES = frozenset({"NoSuchBucket", "ContainerNotFound", "BucketNotFound", "http:404"})
_PERMISSION_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "Forbidden",
        "AuthenticationFailed",
        "AuthorizationFailure",
        "http:401",
        "http:403",
        "EACCES",
        "EPERM",
    }
)
_UNREACHABLE_CODES = frozenset(
    {"ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "ECONNABORTED"}
)


def _protocol_of(fs: fsspec.AbstractFileSystem) -> str:
    protocol = fs.protocol
    return str(protocol[0] if isinstance(protocol, tuple | list) else protocol)


@attrs.frozen
class Recipe:
    """How to open a target again elsewhere (another process, a Dask worker).

    Holds the URL, the storage options as given (secrets included: they must reach the
    process that opens it) and the client choice. Its ``repr`` shows the redacted URL
    and the option names only, so a log line, a traceback or a task description that
    prints it never shows a secret.
    """

    url: str = attrs.field(repr=False)
    options: Mapping[str, Any] = attrs.field(repr=False, factory=dict)
    client: str = "auto"

    def __repr__(self) -> str:
        return (
            f"Recipe({redact_url(self.url)!r}, options=<{len(self.options)} hidden>, "
            f"client={self.client!r})"
        )

    def open(self) -> Target:
        """The target this recipe describes (:meth:`Target.from_url`)."""
        return Target.from_url(self.url, self.options, client=self.client)

    def at(self, path: str) -> Recipe:
        """The same storage and options at ``path`` (a path of the same filesystem, as a
        target's ``root`` or a run prefix is written)."""
        protocol = split_protocol(self.url)[0] or "file"
        return attrs.evolve(self, url=f"{protocol}://{path}")


@define
class Target:
    """An fsspec filesystem and the root path under which a probe may write.

    Build it from a filesystem instance (``Target(fs, "bucket/dir")``) or from a URL
    (``Target.from_url("s3://bucket/dir", storage_options={...})``). The root itself is
    never written to: each run makes its own prefix below it.
    """

    fs: fsspec.AbstractFileSystem
    root: str = field()
    url: str = field(default="")
    options: dict[str, Any] = field(factory=dict)
    #: secret values to scrub from errors; None: those of the filesystem's own options
    _secrets: tuple[str, ...] | None = field(default=None, repr=False)
    #: secrets resolved later (credentials botocore finds when obstore signs a request)
    _secret_source: Callable[[], tuple[str, ...]] | None = field(default=None, repr=False)
    #: the client family that makes the requests (by default picked from ``fs``'s class)
    backend: AsyncBackend | SyncBackend = field(
        default=attrs.Factory(lambda self: backend_for(self.fs), takes_self=True), repr=False
    )
    #: why this client measures, where ``from_url`` chose between two ("the default",
    #: "client='adlfs' was asked", or the storage option obstore cannot take); else empty
    client_reason: str = field(default="", kw_only=True)
    #: a ``client-fallback`` warning for every Result, when ``client="auto"`` could not
    #: use the default client (obstore) and another one measures
    client_notice: Notice | None = field(default=None, kw_only=True)
    #: how to open this target again in another process (None: built from a filesystem
    #: instance, which cannot be rebuilt from a URL)
    recipe: Recipe | None = field(default=None, repr=False)
    #: for an ``s3://`` URL: the endpoint, region and credentials resolved once and handed
    #: to the client that measures, each with its source (None: not an S3 URL)
    s3_endpoint: S3Endpoint | None = field(default=None, kw_only=True)

    @root.validator
    def _check_root(self, _: Any, value: str) -> None:
        if not isinstance(value, str):
            raise ConfigurationError(f"path must be a str, not {type(value).__name__}")
        if "://" in value:
            raise ConfigurationError(
                f"path {redact_url(value)!r} contains a scheme: pass the path alone with a "
                "filesystem, or use Probe.from_url(url, storage_options=...)"
            )

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.fs, fsspec.AbstractFileSystem):
            raise ConfigurationError(
                f"fs must be an fsspec AbstractFileSystem, not {type(self.fs).__name__}"
            )
        self.root = self.fs._strip_protocol(self.root).rstrip("/") if self.root else ""
        if not self.url:
            self.url = f"{self.protocol}://{self.root}"
        if self._secrets is None:  # a filesystem built by the caller: its own options
            self._secrets = secret_values(getattr(self.fs, "storage_options", None) or {})
        if self.backend.fs is not self.fs:
            raise ConfigurationError("backend must drive the target's own filesystem")

    @classmethod
    def from_url(
        cls, url: str, storage_options: Mapping[str, Any] | None = None, *, client: str = "auto"
    ) -> Target:
        """Open ``url`` with fsspec (``url_to_fs``), caches off, errors made clear.

        ``storage_options`` are those of the fsspec implementation (s3fs's for ``s3://``).
        ``client`` picks the client where a protocol has two
        (:data:`storeprobe.backends.client_choice.CLIENTS`):

        - ``s3://``: ``"obstore"``, ``"s3fs"``, or ``"auto"``: obstore when it is installed
          and the options translate to it (see :mod:`storeprobe.backends.s3_choice`), else s3fs;
        - ``abfs://``, ``az://``: ``"obstore"``, ``"adlfs"``, or ``"auto"``: obstore when the
          options translate (:mod:`storeprobe.backends.azure_choice`), else adlfs;
        - ``gs://``: ``"gcsfs"`` (also ``"auto"``) or ``"obstore"``
          (:mod:`storeprobe.backends.gcs_choice`).

        :attr:`client_reason` says why that client measures.

        A missing fsspec implementation raises :class:`MissingDependencyError` naming the
        extra to install (``pip install 'storeprobe[s3]'``).
        """
        _check_url_arguments(url, storage_options)
        options = dict(storage_options or {})
        secret_list = secret_values(options)
        protocol = _known_protocol(url)
        chosen = choose_client(protocol, options, client)
        if chosen.endpoint is not None:  # secrets read from fsspec's configuration too
            secret_list = (*secret_list, *chosen.endpoint.credentials.secrets)
        if chosen.backend is not None:
            return cls(
                chosen.backend.fs,
                url.split("://", 1)[1].rstrip("/"),
                url=redact_url(url),
                options=redact_options(options),
                secrets=secret_list,
                secret_source=chosen.secrets,
                backend=chosen.backend,
                client_reason=chosen.reason,
                recipe=Recipe(url, dict(options), client),
                s3_endpoint=chosen.endpoint,
            )
        opened = options if chosen.storage_options is None else chosen.storage_options
        kwargs = REGISTRY.open_options(protocol, {"skip_instance_cache": True, **opened})
        fs, path = _open_fs(url, protocol, kwargs, secret_list)
        return cls(
            fs,
            path,
            url=redact_url(url)
            if "://" in url
            else f"{fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol}://{path}",
            options=redact_options(options),
            secrets=secret_list,
            recipe=Recipe(url, dict(options), client),
            client_reason=chosen.reason,
            client_notice=chosen.notice,
            s3_endpoint=chosen.endpoint,
        )

    @property
    def client(self) -> str:
        """The storage client this target measures through (the backend's name)."""
        return self.backend.client

    @property
    def endpoint(self) -> str | None:
        """The URL (or ``host:port``) this target's requests go to, without credentials:
        the resolved one for ``s3://`` URLs (:attr:`s3_endpoint`), else what
        :func:`~storeprobe.environment.endpoint_of` finds; None for local storage."""
        if self.s3_endpoint is not None:
            return self.s3_endpoint.shown
        return endpoint_of(self.url, self.options)

    @property
    def protocol(self) -> str:
        """The filesystem's first protocol name (``"s3"``, ``"file"``, ``"memory"``...)."""
        return _protocol_of(self.fs)

    def new_prefix(self, now: dt.datetime | None = None) -> str:
        """A fresh run prefix: ``<root>/storeprobe-<YYYYmmddTHHMMSSZ>-<16 hex digits>``."""
        now = now or dt.datetime.now(dt.UTC)
        name = f"storeprobe-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(8)}"
        return f"{self.root}/{name}" if self.root else name

    def scrub(self, text: str) -> str:
        """``text`` with every secret value of this target replaced by ***."""
        late = self._secret_source() if self._secret_source is not None else ()
        return scrub_patterns(scrub(text, (*(self._secrets or ()), *late)))

    def describe_error(self, exc: BaseException) -> str:
        """One line naming the error type and its scrubbed message (first line, ≤ 400 chars)."""
        return describe_error(exc, self.scrub)

    def translate(self, exc: BaseException, action: str) -> StoreProbeError:
        """Map a backend exception to a :class:`TargetError` subclass, secrets scrubbed.

        The backend's own mapping (its exception classes) is asked first, then its
        client spec's error codes, then the codes every client shares."""
        where = f"{action} on {self.url}"
        classified = self.backend.classify(exc)
        if classified is None and (spec := REGISTRY.for_fs(self.fs)) is not None:
            classified = spec.classify(exc)  # the client's error codes
        if classified is not None and not isinstance(exc, StoreProbeError):
            kind, fix = classified
            return kind(f"{where}: {self.describe_error(exc)}. {fix[:1].upper()}{fix[1:]}")
        return translate_error(exc, where, self.scrub)


def _check_url_arguments(url: object, storage_options: object) -> None:
    """Refuse a URL that is not a non-empty str, options that are not a mapping, and a
    malformed URL (see :func:`_check_url`)."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"url must be a non-empty str, not {url!r}")
    if not isinstance(storage_options, Mapping | None):
        raise ConfigurationError(
            f"storage_options must be a dict, not {type(storage_options).__name__}"
        )
    if _MALFORMED.match(url):
        raise ConfigurationError(
            f"malformed URL {redact_url(url)!r}: write PROTOCOL://BUCKET/PATH "
            "(two slashes), e.g. s3://bucket/dir"
        )
    _check_url(url)


def _known_protocol(url: str) -> str:
    """The protocol of ``url`` (``"file"`` without one), one fsspec knows."""
    protocol = split_protocol(url)[0] or "file"
    if protocol not in known_implementations and protocol not in fsspec.available_protocols():
        raise ConfigurationError(
            f"unknown protocol {protocol!r} in {redact_url(url)!r}: use one fsspec knows, "
            "such as file, memory, s3, gs, abfs or sftp"
        )
    return protocol


def _open_fs(
    url: str, protocol: str, kwargs: dict[str, Any], secret_list: tuple[str, ...]
) -> tuple[fsspec.AbstractFileSystem, str]:
    """``url_to_fs(url, **kwargs)``, its failures made clear: a missing implementation
    names the extra to install, bad options and a failed connection are scrubbed of
    ``secret_list``."""
    try:
        fs, path = url_to_fs(url, **kwargs)
    except ImportError:
        extra = EXTRAS.get(protocol)
        fix = (
            f"pip install 'storeprobe[{extra}]'"
            if extra
            else f"install the fsspec implementation for {protocol!r}"
        )
        raise MissingDependencyError(
            f"protocol {protocol!r} needs a package that is not installed: {fix}"
        ) from None
    except (TypeError, ValueError) as exc:
        message = scrub_patterns(scrub(str(exc), secret_list))
        raise ConfigurationError(
            f"cannot open {redact_url(url)!r} with these storage_options: {message}"
        ) from None
    except Exception as exc:  # filesystems that connect in their constructor (sftp)
        raise translate_error(
            exc,
            f"connecting to {redact_url(url)}",
            lambda text: scrub_patterns(scrub(text, secret_list)),
        ) from None
    return fs, path


def _check_url(url: str) -> None:
    """Refuse what fsspec or urllib would trip over later: an unclosed IPv6 bracket, a
    chained URL (``::``), a port that is not a number from 1 to 65535."""
    scheme, separator, rest = url.partition("://")
    _check_no_userinfo(url, scheme, rest)
    authority = rest.rpartition("@")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host, port = authority, ""
    if separator and authority.startswith("["):
        address, bracket, after = authority.partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ConfigurationError(
                f"malformed host in {redact_url(url)!r}: write an IPv6 address in brackets, "
                f"e.g. {scheme}://[::1]:{_example_port(scheme)}/dir"
            )
        host, port = f"{address}]", after[1:]
    elif separator:
        host, _, port = authority.partition(":")
    if "::" in _BRACKETED.sub("", url):
        raise ConfigurationError(
            f"{redact_url(url)!r} contains '::', which fsspec reads as a chain of URLs "
            "(a cache or an archive layered over a store, which storeprobe does not "
            "measure): give one URL, without '::', e.g. memory://bench or s3://bucket/dir"
        )
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigurationError(
            f"bad port {port!r} in {redact_url(url)!r}: a port is a number from 1 to 65535 "
            f"(e.g. {scheme}://{host or 'host'}:{_example_port(scheme)}/...), or leave "
            "':PORT' out for the default"
        )


#: protocols whose URL names a bucket, never a user: ``user:password@`` there is a
#: credential typed into the wrong place (``abfs://container@account`` is Azure's form)
_BUCKET_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs"})


def _check_no_userinfo(url: str, scheme: str, rest: str) -> None:
    """Refuse ``s3://user:password@host/bucket`` and its kin without showing what stood
    before the ``@``: fsspec would take it for a bucket name and pass it on to the
    client's errors, password included."""
    if scheme.lower() not in _BUCKET_PROTOCOLS or "@" not in rest.split("/", 1)[0]:
        return
    raise ConfigurationError(
        f"{redact_url(url)!r} has a user or password before '@' (not shown): {scheme}:// "
        "names a bucket, not a user or host; give the credentials as options (key=, "
        "secret=, token=) or in the environment, and a server as the endpoint_url option "
        f"(e.g. {scheme.lower()}://bucket/dir with endpoint_url=http://127.0.0.1:9000)"
    )


def _example_port(scheme: str) -> int:
    return 22 if scheme in ("sftp", "ssh") else 443


def describe_error(exc: BaseException, scrubber: Callable[[str], str]) -> str:
    """``"Type: first line of the message"``, scrubbed, at most 400 characters."""
    lines = scrubber(str(exc)).strip().splitlines()
    message = lines[0] if lines else "(no message)"
    if len(message) > 400:
        message = message[:400] + "..."
    return f"{type(exc).__name__}: {message}"


# a certificate the client did not trust: Python's and botocore's exception classes, and
# what obstore (reqwest with rustls, which raises a GenericError with no code or status:
# its message is all it says) writes in its message
_TLS_NAMES = frozenset({"SSLCertVerificationError", "SSLError", "ClientConnectorCertificateError"})
_OBSTORE_TLS_MARKS = ("InvalidCertificate", "CERTIFICATE_VERIFY_FAILED")
#: what obstore writes when it could not connect (reqwest's error, again with no code)
_OBSTORE_UNREACHABLE = "error sending request"


def _obstore_message(exc: BaseException) -> str:
    """The messages of the obstore errors in ``exc``'s chain (obstore gives no code)."""
    found: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(found) < 8:
        if type(current).__module__.startswith("obstore"):
            found.append(str(current))
        current = current.__cause__ or current.__context__
    return "\n".join(found)


# obstore writes the server's answer into its message: "... status code: 403 Forbidden:
# <?xml ...><Error><Code>SignatureDoesNotMatch</Code>..."
_OBSTORE_STATUS = re.compile(r"status code: (\d{3})\b")
_OBSTORE_CODE = re.compile(r"<Code>(\w+)</Code>")


def _obstore_codes(message: str) -> tuple[str, ...]:
    """The HTTP status and the service's error code written in obstore's ``message``."""
    statuses = [f"http:{status}" for status in _OBSTORE_STATUS.findall(message)]
    return (*statuses, *_OBSTORE_CODE.findall(message))


def translate_error(
    exc: BaseException, where: str, scrubber: Callable[[str], str]
) -> StoreProbeError:
    """Map a backend exception to the :class:`TargetError` subclass that fits, with a fix."""
    if isinstance(exc, StoreProbeError):
        return exc
    text = f"{where}: {describe_error(exc, scrubber)}"
    names = {klass.__name__ for klass in type(exc).__mro__}
    message = _obstore_message(exc)
    codes = frozenset((*codes_of(exc), *_obstore_codes(message)))
    if isinstance(exc, FileNotFoundError) or "NotFoundError" in names or codes & _MISSING_CODES:
        return TargetNotFoundError(f"{text}. Check the bucket, container or path exists")
    if "HostKeyNotVerifiable" in names:
        return TargetPermissionError(
            f"{text}. The server's host key is not the one expected: check known_hosts "
            "(storage option known_hosts=PATH) before trusting this server"
        )
    if (
        isinstance(exc, PermissionError)
        or "PermissionDenied" in names
        or "PermissionDeniedError" in names
        or "UnauthenticatedError" in names
        or codes & _PERMISSION_CODES
    ):
        return TargetPermissionError(f"{text}. Check the credentials and their permissions")
    if names & _TLS_NAMES or any(mark in message for mark in _OBSTORE_TLS_MARKS):
        return TargetUnreachableError(
            f"{text}. The server's TLS certificate was not trusted: {TLS_FIX}"
        )
    if (
        isinstance(exc, ConnectionError | TimeoutError | asyncio.TimeoutError)
        or names & _UNREACHABLE_NAMES
        or codes & _UNREACHABLE_CODES
        or _OBSTORE_UNREACHABLE in message
    ):
        return TargetUnreachableError(
            f"{text}. Check the endpoint address, that the server runs, and the network"
        )
    return TargetError(text)
