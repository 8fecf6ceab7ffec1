"""rclone remotes as storeprobe targets: ``wasabi:bench/probe`` read from rclone's config.

:meth:`RcloneConfig.load` reads rclone's configuration file, where rclone itself looks
(``--config``, else ``RCLONE_CONFIG``, else ``$XDG_CONFIG_HOME/rclone/rclone.conf``,
``~/.config/rclone/rclone.conf``, ``~/.rclone.conf``: ``fs/config/config.go``), and
remotes given as environment variables (``RCLONE_CONFIG_<NAME>_<KEY>``, which rclone
lets override the file: ``fs/config.go``, ``ConfigToEnv``). :meth:`RcloneConfig.target`
turns ``NAME:PATH`` into a :class:`~storeprobe.named_target.NamedTarget`: an fsspec URL
and the storage options of the client that measures it.

======================================  =========================================================
rclone type                             URL and storage options
======================================  =========================================================
``s3``                                  ``s3://BUCKET/PATH``; ``key``, ``secret``, ``token``
                                        (access_key_id, secret_access_key, session_token),
                                        ``client_kwargs`` endpoint_url (``endpoint``, with
                                        ``https://`` added as rclone adds it, or the provider's
                                        preset for the region: :mod:`~storeprobe.rclone_presets`)
                                        and region_name (``region``, else rclone's us-east-1);
                                        ``env_auth`` → botocore's chain (``profile``); neither
                                        keys nor env_auth → ``anon`` (rclone goes anonymous too)
``google cloud storage`` (``gcs``)      ``gs://BUCKET/PATH``; ``token`` (service_account_file,
                                        service_account_credentials, ``anon`` for anonymous,
                                        ``google_default`` for env_auth), ``project``
                                        (project_number), ``endpoint_url`` (endpoint)
``azureblob``                           ``abfs://CONTAINER/PATH``; ``account_name`` and
                                        ``account_key``, or ``connection_string`` (given, or
                                        built for ``endpoint`` and ``use_emulator``)
``sftp``                                ``sftp://HOST:PORT/PATH`` (an absolute path);
                                        ``username`` (user), ``password`` (pass, revealed),
                                        ``client_keys`` (key_file), ``passphrase``
                                        (key_file_pass, revealed), ``known_hosts``
                                        (known_hosts_file)
``local``                               the path itself
``alias``                               the remote or path it names, then as above
======================================  =========================================================

rclone's tuning options (chunk sizes, concurrency, ACLs, storage classes) do not apply to
a probe: they are listed in :attr:`NamedTarget.notes`. Options that change where requests
go or how they are signed and that storeprobe cannot honour (an assumed role, a SAS URL,
an OAuth token) are refused with a :class:`ConfigurationError` naming the remote, the
option and the fix.

Obscured values (rclone's ``pass`` fields) are revealed with rclone's own algorithm
(``fs/config/obscure/obscure.go``: AES-256-CTR under rclone's published key, the IV in
front, unpadded URL-safe base64), which needs the ``cryptography`` package (asyncssh,
storeprobe[ssh], brings it). The remotes of an encrypted configuration file are refused
(storeprobe has no way to ask for its password); its environment remotes still work.

Why one module (~550 lines): reading rclone's configuration (its file,
``RCLONE_CONFIG_*`` variables, obscured passwords) and turning each remote type into a
named target are one mapping, read backend by backend against rclone's own
documentation; the S3 providers' endpoints are data in :mod:`storeprobe.rclone_presets`.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.named_target import NamedTarget
from storeprobe.rclone_presets import (
    DEFAULT_S3_REGION,
    S3_ENDPOINT_FIXES,
    S3_REGION_ENDPOINTS,
    UNMAPPED_TYPES,
)

__all__ = ["RcloneConfig", "default_rclone_config", "reveal", "split_remote"]

#: rclone's key for obscuring values (``fs/config/obscure/obscure.go``, ``cryptKey``)
_OBSCURE_KEY = bytes.fromhex("9c935b48730a554d6bfd7c63c886a92bd390198eb8128afbf4de162b8b95f638")
# a remote's name as rclone allows it (``fs/config/configmap``: letters, digits, _ . + @
# - and spaces, not starting with - or a space), then ":" and the path
_REMOTE = re.compile(r"^([\w.+@][\w.+@ -]*):(.*)$", re.DOTALL)
_ENCRYPTED = "RCLONE_ENCRYPT_V0:"
# Azurite's well-known development account, as rclone's use_emulator sets it
# (``backend/azureblob/auth/auth.go``)
_EMULATOR_ACCOUNT = "devstoreaccount1"
_EMULATOR_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_EMULATOR_ENDPOINT = "http://127.0.0.1:10000/devstoreaccount1"
_ALIAS_DEPTH = 8

#: options of each type that decide where requests go or how they are signed, which
#: storeprobe does not map: a remote setting one is refused (option → fix)
_REFUSED: Mapping[str, Mapping[str, str]] = {
    "s3": {
        "role_arn": "assume the role outside storeprobe (an AWS profile with role_arn and "
        "env_auth = true)",
        "sts_endpoint": "remove it",
        "v2_auth": "use a provider that takes V4 signatures",
        "shared_credentials_file": "set AWS_SHARED_CREDENTIALS_FILE instead, with env_auth = true",
        "sse_customer_key": "probe a bucket without SSE-C",
        "sse_customer_key_base64": "probe a bucket without SSE-C",
        "use_accelerate_endpoint": "give the accelerated endpoint as endpoint",
        "ibm_api_key": "use HMAC keys (access_key_id, secret_access_key)",
    },
    "google cloud storage": {
        "access_token": "use service_account_file or env_auth = true",
        "token": "rclone's OAuth token is its own: use service_account_file or env_auth = true",
    },
    "azureblob": dict.fromkeys(
        (
            "sas_url",
            "tenant",
            "client_id",
            "client_secret",
            "client_certificate_path",
            "username",
            "password",
            "service_principal_file",
            "use_msi",
            "use_az",
        ),
        "use account and key, connection_string, or use_emulator",
    ),
    "sftp": {
        "key_pem": "write the key to a file and give it as key_file",
        "ssh": "use the built-in SSH client (remove ssh)",
    },
}
#: options each type maps (everything else is noted as not applying to a probe)
_MAPPED: Mapping[str, frozenset[str]] = {
    "s3": frozenset(
        {
            "type",
            "provider",
            "access_key_id",
            "secret_access_key",
            "session_token",
            "env_auth",
            "profile",
            "endpoint",
            "region",
        }
    ),
    "google cloud storage": frozenset(
        {
            "type",
            "service_account_file",
            "service_account_credentials",
            "anonymous",
            "env_auth",
            "project_number",
            "endpoint",
        }
    ),
    "azureblob": frozenset(
        {"type", "account", "key", "connection_string", "use_emulator", "endpoint", "env_auth"}
    ),
    "sftp": frozenset(
        {"type", "host", "user", "port", "pass", "key_file", "key_file_pass", "known_hosts_file"}
    ),
    "local": frozenset({"type"}),
    "alias": frozenset({"type", "remote"}),
}
_TYPE_NAMES = {"gcs": "google cloud storage"}


def default_rclone_config(environ: Mapping[str, str] | None = None) -> Path:
    """The file rclone reads when given no ``--config``: ``RCLONE_CONFIG``, else the first
    that exists of ``$XDG_CONFIG_HOME/rclone/rclone.conf``, ``~/.config/rclone/rclone.conf``
    and ``~/.rclone.conf``, else ``~/.config/rclone/rclone.conf``."""
    env = os.environ if environ is None else environ
    if env.get("RCLONE_CONFIG"):
        return Path(env["RCLONE_CONFIG"]).expanduser()
    home = Path(env.get("HOME") or Path.home())
    candidates = []
    if env.get("XDG_CONFIG_HOME"):
        candidates.append(Path(env["XDG_CONFIG_HOME"]) / "rclone" / "rclone.conf")
    candidates += [home / ".config" / "rclone" / "rclone.conf", home / ".rclone.conf"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return home / ".config" / "rclone" / "rclone.conf"


def split_remote(spec: str) -> tuple[str, str] | None:
    """``("wasabi", "bench/x")`` for ``"wasabi:bench/x"``; None for a URL (``s3://...``),
    a path without a colon, or a name rclone would not allow."""
    if "://" in spec:
        return None
    match = _REMOTE.match(spec)
    return None if match is None else (match[1], match[2])


def reveal(obscured: str, *, what: str = "value") -> str:
    """The plain text of a value rclone obscured (``rclone obscure``; its ``pass`` fields).

    rclone's algorithm (``fs/config/obscure/obscure.go``): unpadded URL-safe base64 of a
    16-byte IV followed by the text under AES-256-CTR with rclone's published key. The
    error never shows the value.
    """
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        raise MissingDependencyError(
            f"{what} is obscured by rclone and revealing it needs the cryptography package: "
            "pip install cryptography (storeprobe[ssh] brings it), or give the password as "
            "a storage option"
        ) from None
    try:
        data = base64.urlsafe_b64decode(obscured + "=" * (-len(obscured) % 4))
    except (binascii.Error, ValueError):
        data = b""
    if len(data) < 16:
        raise ConfigurationError(
            f"{what} is not a value rclone obscured (not its base64 form): write it with "
            "'rclone config' or 'rclone obscure'"
        )
    decryptor = Cipher(algorithms.AES(_OBSCURE_KEY), modes.CTR(data[:16])).decryptor()
    plain: bytes = decryptor.update(data[16:]) + decryptor.finalize()
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(
            f"{what} is not a value rclone obscured: write it with 'rclone config' or "
            "'rclone obscure'"
        ) from None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes", "on")


@attrs.frozen(kw_only=True)
class RcloneConfig:
    """rclone's remotes, as read from its configuration file and environment variables.

    Build it with :meth:`load`; :meth:`target` maps ``NAME:PATH`` to a
    :class:`NamedTarget`. The ``repr`` shows the file and the remotes' names only.
    """

    #: the file read (it may not exist: then only environment remotes are known)
    path: str
    #: remote name → its options as written in the file
    sections: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict, repr=False)
    #: the ``RCLONE_CONFIG_*`` environment variables at load time
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: the file is encrypted (``rclone config encryption set``): its remotes are unknown
    encrypted: bool = False

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
    ) -> RcloneConfig:
        """Read rclone's configuration (``path``, else :func:`default_rclone_config`).

        A missing file is no error when ``path`` is not given (rclone's remotes may be in
        environment variables only); a ``path`` given must exist.
        """
        env = dict(os.environ if environ is None else environ)
        chosen = Path(path).expanduser() if path is not None else default_rclone_config(env)
        variables = {k: v for k, v in env.items() if k.startswith("RCLONE_CONFIG_")}
        if not chosen.is_file():
            if path is not None:
                raise ConfigurationError(
                    f"rclone config {str(chosen)!r} does not exist: give the file 'rclone "
                    "config file' prints"
                )
            return cls(path=str(chosen), environ=variables)
        try:
            text = chosen.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"cannot read rclone config {str(chosen)!r}: {type(exc).__name__}"
            ) from None
        if _ENCRYPTED in text:  # only its environment remotes can be read
            return cls(path=str(chosen), environ=variables, encrypted=True)
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(text, source=str(chosen))
        except configparser.Error as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigurationError(
                f"rclone config {str(chosen)!r} cannot be parsed ({first}): check it with "
                "'rclone config show'"
            ) from None
        sections = {name: dict(parser.items(name)) for name in parser.sections()}
        return cls(path=str(chosen), sections=sections, environ=variables)

    def _from_environ(self, name: str) -> dict[str, str]:
        prefix = f"RCLONE_CONFIG_{name.upper()}_"
        return {
            key[len(prefix) :].lower(): value
            for key, value in self.environ.items()
            if key.startswith(prefix)
        }

    def remote(self, name: str) -> Mapping[str, str] | None:
        """The options of remote ``name`` (the file's, overridden by its environment
        variables, as rclone reads them), or None where it has no ``type``."""
        found = {**self.sections.get(name, {}), **self._from_environ(name)}
        return found if found.get("type") else None

    @property
    def names(self) -> tuple[str, ...]:
        """The remotes of the file (environment remotes are found by name only)."""
        return tuple(sorted(self.sections))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.remote(name) is not None

    def target(self, spec: str) -> NamedTarget:
        """The target ``NAME:PATH`` names (``wasabi:bench/probe``), as storeprobe opens it."""
        split = split_remote(spec)
        if split is None:
            raise ConfigurationError(
                f"{spec!r} is not an rclone remote path: write NAME:PATH, e.g. wasabi:bench/x"
            )
        return self._target(*split, depth=0)

    def _target(self, name: str, path: str, depth: int) -> NamedTarget:
        remote = self.remote(name)
        if remote is None and self.encrypted:
            raise ConfigurationError(
                f"rclone config {self.path!r} is encrypted, and storeprobe cannot ask for "
                f"its password: give remote {name!r} as RCLONE_CONFIG_{name.upper()}_<KEY> "
                "environment variables, or as a storeprobe.toml target"
            )
        if remote is None:
            known = ", ".join(self.names) or "none"
            raise ConfigurationError(
                f"no rclone remote {name!r} in {self.path!r} (its remotes: {known}) nor in "
                f"RCLONE_CONFIG_{name.upper()}_TYPE: add it with 'rclone config', point "
                "RCLONE_CONFIG (or --rclone-config) at the file that has it, or give a URL "
                "such as s3://bucket/dir"
            )
        kind = _TYPE_NAMES.get(remote["type"], remote["type"])
        where = f"rclone remote {name!r} ({self.path})"
        if kind in UNMAPPED_TYPES or kind not in _MAPPED:
            fix = UNMAPPED_TYPES.get(
                kind, "give its storage as a URL with storage options (storeprobe.toml)"
            )
            raise ConfigurationError(
                f"{where} is of type {kind!r}, which storeprobe does not open "
                f"(it opens s3, google cloud storage, azureblob, sftp, local and alias): {fix}"
            )
        for option, fix in _REFUSED.get(kind, {}).items():
            if remote.get(option, "").strip():
                raise ConfigurationError(
                    f"{where} sets {option}, which storeprobe cannot honour: {fix}"
                )
        unused = sorted(set(remote) - _MAPPED[kind])
        notes = (
            (f"rclone options that do not apply to a probe: {', '.join(unused)}",) if unused else ()
        )
        if kind == "alias":
            if depth >= _ALIAS_DEPTH:
                raise ConfigurationError(f"{where}: aliases nest more than {_ALIAS_DEPTH} deep")
            aimed = remote.get("remote", "")
            joined = f"{aimed.rstrip('/')}/{path}" if path else aimed
            split = split_remote(joined)
            if split is not None:
                inner = self._target(*split, depth=depth + 1)
                return attrs.evolve(inner, name=name, notes=(*notes, *inner.notes))
            return self._local(name, joined, notes)
        if kind == "local":
            return self._local(name, path, notes)
        url, options, more = _MAPPERS[kind](name, path, remote, where)
        return NamedTarget(
            name=name, url=url, options=options, source=self.path, notes=(*more, *notes)
        )

    def _local(self, name: str, path: str, notes: tuple[str, ...]) -> NamedTarget:
        return NamedTarget(
            name=name,
            url=os.path.abspath(os.path.expanduser(path)),
            source=self.path,
            notes=notes,
        )


def _bucket_path(name: str, path: str, where: str, what: str) -> str:
    stripped = path.strip("/")
    if not stripped:
        raise ConfigurationError(
            f"{where} needs a {what} in the path: write {name}:{what.upper()}/DIR, e.g. "
            f"{name}:bench/storeprobe"
        )
    return stripped


def _s3(
    name: str, path: str, remote: Mapping[str, str], where: str
) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    provider = remote.get("provider", "")
    region = remote.get("region", "").strip()
    endpoint = remote.get("endpoint", "").strip()
    notes: list[str] = []
    if not endpoint and provider in S3_REGION_ENDPOINTS:
        table = S3_REGION_ENDPOINTS[provider]
        if region not in table:
            raise ConfigurationError(
                f"{where} names provider {provider} without an endpoint, and region "
                f"{region or '(none)'!r} is not one of rclone's {provider} presets: add "
                f"endpoint = the bucket's endpoint, or region = one of {', '.join(table)}"
            )
        endpoint = table[region]
        notes.append(f"endpoint {endpoint} from rclone's {provider} preset for region {region}")
    elif not endpoint and provider in S3_ENDPOINT_FIXES:
        raise ConfigurationError(
            f"{where} names provider {provider} without an endpoint: add "
            f"{S3_ENDPOINT_FIXES[provider]}"
        )
    elif not endpoint and provider not in ("", "AWS"):
        raise ConfigurationError(
            f"{where} names provider {provider} without an endpoint (rclone would send its "
            "requests to AWS): add endpoint = the provider's S3 endpoint"
        )
    client: dict[str, Any] = {"region_name": region or DEFAULT_S3_REGION}
    if endpoint:
        client["endpoint_url"] = endpoint if endpoint.startswith("http") else f"https://{endpoint}"
    options: dict[str, Any] = {}
    key, secret = remote.get("access_key_id", ""), remote.get("secret_access_key", "")
    if key or secret:
        if not (key and secret):
            missing = "secret_access_key" if key else "access_key_id"
            raise ConfigurationError(f"{where} has no {missing}: add it, or remove both keys")
        options.update(key=key, secret=secret)
        if remote.get("session_token"):
            options["token"] = remote["session_token"]
    elif _truthy(remote.get("env_auth")):
        if remote.get("profile"):
            options["profile"] = remote["profile"]
    else:
        options["anon"] = True  # rclone's anonymous access, as it falls back to
        notes.append("no access keys and env_auth is false: anonymous requests, as rclone's")
    options["client_kwargs"] = client
    return f"s3://{_bucket_path(name, path, where, 'bucket')}", options, tuple(notes)


def _gcs(
    name: str, path: str, remote: Mapping[str, str], where: str
) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    options: dict[str, Any] = {}
    if remote.get("service_account_file"):
        options["token"] = os.path.expanduser(remote["service_account_file"])
    elif remote.get("service_account_credentials"):
        try:
            options["token"] = json.loads(remote["service_account_credentials"])
        except json.JSONDecodeError:
            raise ConfigurationError(
                f"{where}: service_account_credentials is not JSON: paste the key file's "
                "contents, or give service_account_file"
            ) from None
    elif _truthy(remote.get("anonymous")):
        options["token"] = "anon"
    elif _truthy(remote.get("env_auth")):
        options["token"] = "google_default"
    else:
        raise ConfigurationError(
            f"{where} has no credentials storeprobe can use: add service_account_file, "
            "env_auth = true or anonymous = true"
        )
    if remote.get("project_number"):
        options["project"] = remote["project_number"]
    if remote.get("endpoint"):
        options["endpoint_url"] = remote["endpoint"]
    return f"gs://{_bucket_path(name, path, where, 'bucket')}", options, ()


def _connection_string(account: str, key: str, endpoint: str) -> str:
    scheme = "http" if endpoint.startswith("http://") else "https"
    return (
        f"DefaultEndpointsProtocol={scheme};AccountName={account};AccountKey={key};"
        f"BlobEndpoint={endpoint};"
    )


def _azure(
    name: str, path: str, remote: Mapping[str, str], where: str
) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    account, key = remote.get("account", ""), remote.get("key", "")
    endpoint = remote.get("endpoint", "")
    options: dict[str, Any]
    if remote.get("connection_string"):
        options = {"connection_string": remote["connection_string"]}
    elif _truthy(remote.get("use_emulator")):
        options = {
            "connection_string": _connection_string(
                account or _EMULATOR_ACCOUNT, key or _EMULATOR_KEY, endpoint or _EMULATOR_ENDPOINT
            )
        }
    elif endpoint:
        if not (account and key):
            raise ConfigurationError(f"{where} sets endpoint: add account and key beside it")
        options = {"connection_string": _connection_string(account, key, endpoint)}
    elif account and key:
        options = {"account_name": account, "account_key": key}
    elif account:
        options = {"account_name": account, "anon": not _truthy(remote.get("env_auth"))}
    else:
        raise ConfigurationError(
            f"{where} has no account: add account and key, connection_string or use_emulator"
        )
    return f"abfs://{_bucket_path(name, path, where, 'container')}", options, ()


def _sftp(
    name: str, path: str, remote: Mapping[str, str], where: str
) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    host = remote.get("host", "").strip()
    if not host:
        raise ConfigurationError(f"{where} has no host: add host = the server's name")
    if not path.startswith("/"):
        raise ConfigurationError(
            f"{where}: {name}:{path} is relative to the login directory, which storeprobe "
            f"cannot see before it connects: write the absolute path, e.g. {name}:/home/"
            f"{remote.get('user') or 'USER'}/{path or 'bench'}"
        )
    port = remote.get("port", "").strip() or "22"
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigurationError(f"{where}: port {port!r} is not a number from 1 to 65535")
    shown_host = f"[{host}]" if ":" in host else host
    url = f"sftp://{shown_host}{'' if port == '22' else ':' + port}{path}"
    options: dict[str, Any] = {}
    if remote.get("user"):
        options["username"] = remote["user"]
    if remote.get("pass"):
        options["password"] = reveal(remote["pass"], what=f"pass of {where}")
    if remote.get("key_file"):
        options["client_keys"] = [os.path.expanduser(remote["key_file"])]
    if remote.get("key_file_pass"):
        options["passphrase"] = reveal(remote["key_file_pass"], what=f"key_file_pass of {where}")
    notes: tuple[str, ...] = ()
    if remote.get("known_hosts_file"):
        options["known_hosts"] = os.path.expanduser(remote["known_hosts_file"])
    else:
        notes = (
            "no known_hosts_file: the host key is checked against ~/.ssh/known_hosts (rclone "
            "would accept any host key)",
        )
    return url, options, notes


#: how each type becomes a URL, storage options and notes (name, path, options, where)
_Mapper = Callable[[str, str, Mapping[str, str], str], tuple[str, dict[str, Any], tuple[str, ...]]]
_MAPPERS: Mapping[str, _Mapper] = {
    "s3": _s3,
    "google cloud storage": _gcs,
    "azureblob": _azure,
    "sftp": _sftp,
}
