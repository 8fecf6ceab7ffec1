"""Where a measurement was made: host, CPU, memory, OS, software, time, label, endpoint.

:meth:`Environment.capture` reads the machine (CPU model, memory, operating system,
package versions) and, for a remote target, the endpoint's ``host:port`` and the
round-trip time to it: the median of five TCP connects, measured before the probe's
timed window and never inside it. :func:`endpoint_of` finds that endpoint in a URL and
its fsspec ``storage_options`` (S3, GCS, Azure Blob, SFTP, HTTP) without keeping any
credential, path or query.

Why one module (~410 lines): an Environment's fields and the readers that fill them (the
machine, the software, the endpoint of each protocol, the round trip) are one record read
against the Result's ``environment`` in docs/result-format.md.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from attrs import field, frozen

from storeprobe.errors import ConfigurationError

__all__ = ["Connect", "Environment", "check_label", "endpoint_address", "endpoint_of"]

_PACKAGES = (
    "storeprobe",
    "fsspec",
    "numpy",
    "s3fs",
    "obstore",
    "gcsfs",
    "adlfs",
    "sshfs",
    "aiobotocore",
    "botocore",
)
MAX_LABEL = 64
#: TCP connects whose median is the round-trip time.
RTT_CONNECTS = 5
#: Seconds one connect may take before the round trip is given up (``rtt_note`` says so).
RTT_TIMEOUT = 3.0

#: Opens a TCP connection to ``(address, port)`` within ``timeout`` seconds, like
#: :func:`socket.create_connection`; the returned socket is closed at once.
Connect = Callable[[tuple[str, int], float], socket.socket]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOCAL_PROTOCOLS = frozenset({"", "file", "local", "memory"})


def check_label(label: str | None) -> str | None:
    """Return ``label`` if it is None or 1-64 printable characters, else raise."""
    if label is None:
        return None
    if not isinstance(label, str) or not label or len(label) > MAX_LABEL:
        raise ConfigurationError(
            f"label must be a string of 1 to {MAX_LABEL} characters, not {label!r}"
        )
    if not label.isprintable():
        raise ConfigurationError(
            f"label {label!r} contains control characters: use printable text such as 'home-ssd'"
        )
    return label


def _validate_label(_: object, __: object, value: str | None) -> None:
    check_label(value)


def _versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


# -- the machine ------------------------------------------------------------------------
def _cpu_model() -> str | None:
    """The CPU's marketing name: ``model name`` in /proc/cpuinfo, else the platform's."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _memory_bytes() -> int | None:
    """Total physical memory in bytes: ``MemTotal`` of /proc/meminfo, else sysconf."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    number, unit = line.split()[1:3]
                    if unit.lower() == "kb":
                        return int(number) * 1024
    except (OSError, ValueError):
        pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def _operating_system() -> str:
    """The distribution or OS name and the kernel, e.g. ``Debian GNU/Linux 12 (bookworm),
    Linux 6.1.0``; ``platform.system()`` and ``release()`` where no name is known."""
    kernel = f"{platform.system()} {platform.release()}".strip()
    name: str | None = None
    if sys.platform.startswith("linux"):
        try:
            name = platform.freedesktop_os_release().get("PRETTY_NAME")
        except OSError:
            name = None
    elif sys.platform == "darwin" and platform.mac_ver()[0]:
        name = f"macOS {platform.mac_ver()[0]}"
    elif sys.platform == "win32":
        name = f"Windows {platform.win32_ver()[0]}".strip()
    return f"{name}, {kernel}" if name else kernel


# -- the endpoint -----------------------------------------------------------------------
def endpoint_address(address: str, default_port: int | None = None) -> str | None:
    """``host:port`` of a URL or ``host[:port]``, with no user, password, path or query.

    The port is the URL's, else 80 for ``http://``, 443 for ``https://``, else
    ``default_port``. IPv6 hosts come back in brackets (``[::1]:9000``). None when no
    host or no port can be told.
    """
    text = address.strip()
    if not text:
        return None
    parts = urlsplit(text if "://" in text else "//" + text)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number in 0-65535
        return None
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme.lower(), default_port)
    if not host or port is None:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _connection_string_endpoint(connection_string: str) -> str | None:
    """The Blob endpoint of an Azure connection string; the key in it is never read."""
    fields: dict[str, str] = {}
    for item in connection_string.split(";"):
        key, sep, value = item.partition("=")
        if sep:
            fields[key.strip().lower()] = value.strip()
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        return "127.0.0.1:10000"  # Azurite's blob port, what the Azure SDK assumes
    if fields.get("blobendpoint"):
        return endpoint_address(fields["blobendpoint"])
    account = fields.get("accountname")
    if account:
        suffix = fields.get("endpointsuffix") or "core.windows.net"
        scheme = fields.get("defaultendpointsprotocol") or "https"
        return endpoint_address(f"{scheme}://{account}.blob.{suffix}")
    return None


def endpoint_of(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The ``host:port`` a remote target's requests go to, or None (local, or unknown).

    - ``s3://``: ``endpoint_url`` or ``client_kwargs.endpoint_url``, else
      ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, else AWS
      (``s3.<region>.amazonaws.com:443`` with ``client_kwargs.region_name``, else
      ``s3.amazonaws.com:443``);
    - ``gs://``/``gcs://``: ``endpoint_url``, else ``STORAGE_EMULATOR_HOST``, else
      ``storage.googleapis.com:443``;
    - ``az://``/``abfs://``/``abfss://``: ``account_url``, else the ``BlobEndpoint`` (or
      account name) of ``connection_string``, else ``<account_name>.blob.core.windows.net:443``;
      the same from ``AZURE_STORAGE_CONNECTION_STRING`` / ``AZURE_STORAGE_ACCOUNT_NAME``;
    - ``sftp://``/``ssh://``: the URL's host (or ``host``) and ``port`` (default 22);
    - ``http://``/``https://``: the URL's host and port.

    ``environ`` defaults to ``os.environ``. Credentials, paths and queries never appear
    in the answer. A target opened from an ``s3://`` URL records the endpoint resolved
    for its client instead (``Target.endpoint``: profiles and fsspec's configuration
    too, see :mod:`storeprobe.backends.s3_endpoint`); this is the answer for the rest.
    """
    options: Mapping[str, Any] = storage_options or {}
    env: Mapping[str, str] = os.environ if environ is None else environ
    scheme, sep, _ = url.partition("://")
    protocol = scheme.lower() if sep else "file"
    client_kwargs = options.get("client_kwargs")
    client: Mapping[str, Any] = client_kwargs if isinstance(client_kwargs, Mapping) else {}
    if protocol in _LOCAL_PROTOCOLS:
        return None
    if protocol in ("s3", "s3a"):
        return _s3_endpoint(options, client, env)
    if protocol in ("gs", "gcs"):
        given = _first(options.get("endpoint_url"), env.get("STORAGE_EMULATOR_HOST"))
        return endpoint_address(given, 443) if given else "storage.googleapis.com:443"
    if protocol in ("az", "abfs", "abfss", "adl"):
        return _azure_endpoint(options, env)
    if protocol in ("sftp", "ssh"):
        return _sftp_endpoint(url, options)
    if protocol in ("http", "https"):
        return endpoint_address(url)
    return None


def _first(*values: Any) -> str | None:
    """The first of ``values`` that is a string with more than blanks in it."""
    for value in values:
        if isinstance(value, str) and value.strip():
            return value
    return None


def _s3_endpoint(
    options: Mapping[str, Any], client: Mapping[str, Any], env: Mapping[str, str]
) -> str | None:
    """The endpoint of an ``s3://`` URL (see :func:`endpoint_of`); ``client`` is
    ``options["client_kwargs"]`` (empty unless a mapping)."""
    given = _first(
        options.get("endpoint_url"),
        client.get("endpoint_url"),
        env.get("AWS_ENDPOINT_URL_S3"),
        env.get("AWS_ENDPOINT_URL"),
    )
    if given:
        return endpoint_address(given, 443)
    region = _first(client.get("region_name"), options.get("region_name"))
    return f"s3.{region.strip()}.amazonaws.com:443" if region else "s3.amazonaws.com:443"


def _azure_endpoint(options: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The Blob endpoint of an Azure URL (see :func:`endpoint_of`); no key is read."""
    account_url = _first(options.get("account_url"))
    if account_url:
        return endpoint_address(account_url, 443)
    connection_string = _first(
        options.get("connection_string"), env.get("AZURE_STORAGE_CONNECTION_STRING")
    )
    if connection_string:
        return _connection_string_endpoint(connection_string)
    account = _first(options.get("account_name"), env.get("AZURE_STORAGE_ACCOUNT_NAME"))
    return endpoint_address(f"{account.strip()}.blob.core.windows.net:443") if account else None


def _sftp_endpoint(url: str, options: Mapping[str, Any]) -> str | None:
    """The SSH server of an ``sftp://`` URL: its host (or ``host``) and port (or ``port``,
    else 22); None for a bad port."""
    from_url = urlsplit(url)
    try:
        url_port = from_url.port
    except ValueError:
        return None
    host = _first(options.get("host")) or from_url.hostname
    port = options.get("port") or url_port or 22
    if not host or not isinstance(port, int) or isinstance(port, bool):
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _round_trip(endpoint: str, connect: Connect) -> tuple[float | None, str | None]:
    """Median seconds of :data:`RTT_CONNECTS` TCP connects to ``endpoint``, or (None, why).

    The name is resolved once, before any connect is timed, so the figure holds no DNS
    lookup. The first failed connect ends the measurement.
    """
    host, _, port_text = endpoint.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (ValueError, OSError) as exc:
        return None, f"could not resolve {endpoint}: {type(exc).__name__}"
    address = (str(resolved[0][4][0]), port)
    times: list[float] = []
    for _ in range(RTT_CONNECTS):
        started = time.perf_counter_ns()
        try:
            connection = connect(address, RTT_TIMEOUT)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return None, f"TCP connect to {endpoint} failed: {reason}"
        elapsed = time.perf_counter_ns() - started
        connection.close()
        times.append(elapsed / 1e9)
    return statistics.median(times), None


def _create_connection(address: tuple[str, int], timeout: float) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


@frozen(kw_only=True)
class Environment:
    """The machine and software a Result was measured with. ``capture()`` reads them.

    ``memory_bytes`` is total physical memory in bytes; ``rtt_s`` the median TCP connect
    time to ``endpoint`` in seconds (None for a local target, or when it could not be
    measured: ``rtt_note`` says why). Fields added after the first release are None when
    a document written before them is loaded.
    """

    hostname: str
    cpu_count: int
    platform: str
    python: str
    packages: dict[str, str] = field(factory=dict, hash=False)
    utc: str = ""
    label: str | None = field(default=None, validator=_validate_label)
    cpu_model: str | None = None
    memory_bytes: int | None = None
    operating_system: str | None = None
    endpoint: str | None = None
    rtt_s: float | None = None
    rtt_note: str | None = None

    @classmethod
    def capture(
        cls,
        label: str | None = None,
        *,
        endpoint: str | None = None,
        connect: Connect | None = None,
    ) -> Environment:
        """Read the host, CPU, memory, OS, versions and UTC time; for ``endpoint`` (a URL
        such as ``http://127.0.0.1:9031`` or ``host:port``, e.g. from :func:`endpoint_of`)
        also keep its ``host:port`` and measure the round-trip time.

        The round trip is the median of five TCP connects, each given up after
        :data:`RTT_TIMEOUT` seconds. Call this outside any timed window. ``connect``
        replaces :func:`socket.create_connection` (for tests).
        """
        checked = check_label(label)
        address = rtt = note = None
        if endpoint is not None:
            address = endpoint_address(endpoint)
            if address is None:
                note = "no host and port in the endpoint"
            else:
                rtt, note = _round_trip(address, connect or _create_connection)
        return cls(
            hostname=socket.gethostname(),
            cpu_count=os.cpu_count() or 0,
            platform=platform.platform(),
            python=sys.version.split()[0],
            packages=_versions(),
            utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            label=checked,
            cpu_model=_cpu_model(),
            memory_bytes=_memory_bytes(),
            operating_system=_operating_system(),
            endpoint=address,
            rtt_s=rtt,
            rtt_note=note,
        )

    @property
    def name(self) -> str:
        """The label if one was given, else the host name."""
        return self.label or self.hostname

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``memory_bytes`` in bytes, ``rtt_s`` in s)."""
        return {
            "hostname": self.hostname,
            "cpu_count": self.cpu_count,
            "platform": self.platform,
            "python": self.python,
            "packages": dict(self.packages),
            "utc": self.utc,
            "label": self.label,
            "cpu_model": self.cpu_model,
            "memory_bytes": self.memory_bytes,
            "operating_system": self.operating_system,
            "endpoint": self.endpoint,
            "rtt_s": self.rtt_s,
            "rtt_note": self.rtt_note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Environment:
        """Inverse of :meth:`to_dict`; keys a document predates are None."""
        return cls(**data)
