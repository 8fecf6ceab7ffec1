"""Where an ``s3://`` target's requests go, in which region and as whom: resolved once.

:func:`resolve_s3` reads every place s3fs (botocore) would look, in botocore's order, and
returns one frozen :class:`S3Endpoint`; the client that measures, obstore or s3fs, is then
handed exactly that endpoint and region, so both send every request to the same place.
Each setting carries its source ("argument client_kwargs.endpoint_url", "env
AWS_ENDPOINT_URL", "profile wasabi"...).

The options are s3fs's storage options with fsspec's configuration beneath them (as
s3fs gets them: ``fsspec.config.conf["s3"]``, filled from ``FSSPEC_S3_*`` variables and
fsspec's config files when fsspec is imported; given options win, key by key).

- **endpoint**: ``endpoint_url``, then ``client_kwargs.endpoint_url``; then, unless
  ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` (or the profile's
  ``ignore_configured_endpoint_urls``) is true, ``AWS_ENDPOINT_URL_S3``,
  ``AWS_ENDPOINT_URL``, the profile's ``services`` section (``s3 = endpoint_url = ...``)
  and the profile's ``endpoint_url`` (botocore's ``ConfiguredEndpointProvider`` order);
  else AWS itself (``https://s3.<region>.amazonaws.com``).
- **region**: ``client_kwargs.region_name``, then ``AWS_REGION`` (the variable of the AWS
  CLI v2, the other AWS SDKs and obstore), then ``AWS_DEFAULT_REGION`` (botocore's), then
  the profile's ``region``. botocore alone ignores ``AWS_REGION``: storeprobe hands the
  region to s3fs explicitly, so both clients sign for the same one.
- **profile**: ``profile``, then ``AWS_DEFAULT_PROFILE``, then ``AWS_PROFILE`` (botocore's
  order), else ``default``; its settings are read from ``AWS_CONFIG_FILE`` and
  ``AWS_SHARED_CREDENTIALS_FILE`` (``~/.aws/config`` and ``~/.aws/credentials``) through
  botocore's own session. A profile named but not found is a :class:`ConfigurationError`.
- **trust** (``https://`` endpoints): ``client_kwargs.verify``, then ``AWS_CA_BUNDLE``,
  ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE`` (:mod:`.s3_trust`).
- **checksums** (s3fs's request bodies): ``config_kwargs.request_checksum_calculation``,
  then ``AWS_REQUEST_CHECKSUM_CALCULATION``, then the profile's
  ``request_checksum_calculation``; else ``when_required`` on an endpoint that is not
  AWS's (``*.amazonaws.com``), chosen by storeprobe, because current botocore sends every
  body as aws-chunked with a trailing CRC checksum by default, which S3-compatible
  servers (``rclone serve s3`` over HTTPS, several products) refuse with
  ``MissingContentLength``; and botocore's own ``when_supported`` on AWS. obstore sends
  no checksum unless told to, so the mode concerns s3fs only.
- **credentials**: ``anon=True``; else ``key`` and ``secret`` (and ``token``); else
  botocore's credential chain (environment, the profile, SSO, roles), read when the first
  request is signed, never here: resolving does no network I/O.

Why one module (~440 lines): resolving is one ordered reading of botocore's sources
(arguments, fsspec's configuration, environment, profile) whose precedence must be seen
in one place to be checked against botocore's own; both S3 clients take its result.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import fsspec.config
from attrs import field, frozen

from storeprobe.backends.s3_trust import S3Trust, resolve_trust
from storeprobe.environment import endpoint_address
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice
from storeprobe.redaction import redact_url

__all__ = [
    "CHECKSUM_SETTINGS",
    "CredentialKind",
    "S3Credentials",
    "S3Endpoint",
    "fsspec_defaults",
    "resolve_s3",
]

#: how requests are signed: with keys given as options, unsigned, or with what botocore's
#: credential chain finds when the first request is signed
CredentialKind = Literal["static", "anonymous", "chain"]
# the fsspec protocols whose configuration s3fs takes (its ``protocol`` tuple)
_FSSPEC_PROTOCOLS = ("s3", "s3a")
_TRUE = frozenset({"true", "1", "yes"})
#: botocore's checksum settings (config_kwargs names), set together by storeprobe
CHECKSUM_SETTINGS = ("request_checksum_calculation", "response_checksum_validation")
#: storeprobe's checksum mode for an endpoint that is not AWS's
_WHEN_REQUIRED = "when_required"
# botocore settings (and their variables) that send requests to another AWS endpoint, and
# those of a profile's ``s3`` section
_BOTOCORE_SETTINGS = (
    ("use_fips_endpoint", "AWS_USE_FIPS_ENDPOINT"),
    ("use_dualstack_endpoint", "AWS_USE_DUALSTACK_ENDPOINT"),
)
_S3_SECTION_SETTINGS = frozenset(
    {"addressing_style", "use_accelerate_endpoint", "use_dualstack_endpoint"}
)


@frozen(kw_only=True)
class S3Credentials:
    """How requests are signed (:data:`CredentialKind`) and where that was read.

    Key, secret and token are never in the ``repr``."""

    kind: CredentialKind
    source: str
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    #: the profile named in the options, which botocore's chain reads instead of the
    #: environment's keys (as s3fs passes it to its session); None: ``AWS_PROFILE`` or
    #: ``default``, as botocore finds them
    profile: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values held (to scrub from errors)."""
        return tuple(value for value in (self.secret_access_key, self.session_token) if value)


@frozen(kw_only=True)
class S3Endpoint:
    """Where an ``s3://`` target's requests go, in which region, signed how; each with
    its source (see the module docstring). Built by :func:`resolve_s3`."""

    #: the endpoint URL given or configured; None: AWS's own endpoint for the region
    endpoint_url: str | None = field(repr=False)
    endpoint_source: str
    #: the region requests are signed for (None: none anywhere; each client's default)
    region: str | None
    region_source: str
    credentials: S3Credentials
    #: the AWS profile whose settings were read, and why it
    profile: str
    profile_source: str
    #: an endpoint variable that botocore does not read but obstore would (``AWS_ENDPOINT``,
    #: or one botocore was told to ignore), and its name; None: none
    unread_endpoint: str | None = None
    #: settings botocore (so s3fs) applies and obstore does not, each "name (source)":
    #: FIPS, dual-stack or accelerated AWS endpoints, virtual-hosted addressing on a
    #: custom endpoint
    botocore_only: tuple[str, ...] = ()
    #: the certificates an ``https://`` endpoint is checked against (:mod:`.s3_trust`)
    trust: S3Trust = field(factory=S3Trust)
    #: botocore's ``request_checksum_calculation`` s3fs measures with (``when_supported``:
    #: a checksum on every body; ``when_required``: only where S3 requires one) and why
    checksums: str = "when_supported"
    checksums_source: str = "botocore's default"

    @property
    def checksums_chosen(self) -> bool:
        """True when storeprobe chose ``when_required`` (nobody set a mode, and the
        endpoint is not AWS's): s3fs is handed it in ``config_kwargs``."""
        return self.checksums_source.startswith("storeprobe")

    def notices(self, client: str) -> tuple[Notice, ...]:
        """What every Result measured through ``client`` says about this endpoint: a
        ``tls-unverified`` warning, and for s3fs the checksum mode storeprobe chose."""
        found = [] if self.trust.notice is None else [self.trust.notice]
        if client == "s3fs" and self.checksums_chosen:
            found.append(
                Notice(
                    code=Code.CHECKSUMS_WHEN_REQUIRED,
                    message=f"s3fs sent checksums only where S3 requires them "
                    f"(request_checksum_calculation='{self.checksums}'): "
                    f"{self.checksums_source}",
                    fix="to measure botocore's default, pass config_kwargs="
                    "{'request_checksum_calculation': 'when_supported'}",
                )
            )
        return tuple(found)

    def __repr__(self) -> str:
        return (
            f"S3Endpoint({self.shown!r} from {self.endpoint_source}, region "
            f"{self.region!r} from {self.region_source}, credentials {self.credentials.kind} "
            f"from {self.credentials.source})"
        )

    @property
    def url(self) -> str:
        """The URL requests go to: the endpoint, else AWS's for the region."""
        if self.endpoint_url is not None:
            return self.endpoint_url
        return (
            f"https://s3.{self.region}.amazonaws.com" if self.region else "https://s3.amazonaws.com"
        )

    @property
    def shown(self) -> str:
        """:attr:`url` without user, password or query."""
        return redact_url(self.url)

    @property
    def address(self) -> str | None:
        """``host:port`` of :attr:`url` (what a Result's environment records)."""
        return endpoint_address(self.url, 443)

    @property
    def plain_http(self) -> bool:
        """True for an ``http://`` endpoint (a client must be allowed plain HTTP)."""
        return self.url.lower().startswith("http://")

    def describe(self) -> str:
        """One line: endpoint, region and credentials, each with its source."""
        region = self.region or "none (the client's default)"
        return (
            f"{self.shown} ({self.endpoint_source}), region {region} ({self.region_source}), "
            f"credentials: {self.credentials.source}, TLS: {self.trust.describe()}, "
            f"checksums: {self.checksums} ({self.checksums_source})"
        )


def fsspec_defaults() -> dict[str, Any]:
    """fsspec's configuration for s3fs, as s3fs's constructor merges it."""
    merged: dict[str, Any] = {}
    for protocol in _FSSPEC_PROTOCOLS:
        merged.update(fsspec.config.conf.get(protocol, {}))
    return merged


def _option_source(name: str, given: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """Where option ``name`` (``client_kwargs.endpoint_url`` for a nested one) was read."""
    top = name.split(".", 1)[0]
    if top in given:
        return f"argument {name}"
    variable = f"FSSPEC_S3_{top.upper()}"
    return f"env {variable}" if variable in environ else "fsspec config"


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


class _Profile:
    """The profile's settings through botocore's own session (nothing when botocore is
    not installed)."""

    def __init__(self, named: str | None, source: str) -> None:
        self.scoped: Mapping[str, Any] = {}
        self.services: Mapping[str, Any] = {}
        self.ignore_endpoints = False
        #: botocore settings that change where requests go, "name (source)" → value
        self.settings: dict[str, Any] = {}
        self.name = named or "default"
        self.source = source
        if importlib.util.find_spec("botocore") is None:
            return
        import botocore.exceptions
        import botocore.session

        session = botocore.session.Session(profile=named)
        self.name = str(session.get_config_variable("profile") or "default")
        try:
            self.scoped = session.get_scoped_config()
            services = self.scoped.get("services")
            if services is not None:
                section = session.full_config.get("services", {}).get(services)
                if not section:
                    raise ConfigurationError(
                        f"AWS profile {self.name!r} names services section {services!r}, "
                        "which the AWS config file does not have: add [services "
                        f"{services}] or remove 'services' from the profile"
                    )
                self.services = section.get("s3", {}) or {}
            flag = session.get_config_variable("ignore_configured_endpoint_urls")
            for name, variable in _BOTOCORE_SETTINGS:
                value = session.get_config_variable(name)
                if value is not None:
                    source = (
                        f"env {variable}" if os.environ.get(variable) else f"profile {self.name}"
                    )
                    self.settings[f"{name} ({source})"] = value
            section = self.scoped.get("s3")
            for name, value in (section if isinstance(section, Mapping) else {}).items():
                if name in _S3_SECTION_SETTINGS:
                    self.settings[f"s3.{name} (profile {self.name})"] = value
        except botocore.exceptions.ProfileNotFound:
            config = os.environ.get("AWS_CONFIG_FILE", "~/.aws/config")
            credentials = os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")
            known = ", ".join(sorted(session.available_profiles)) or "none"
            raise ConfigurationError(
                f"AWS profile {self.name!r} ({source}) is in neither {config} nor "
                f"{credentials} (profiles there: {known}): add it, or name one that exists"
            ) from None
        except botocore.exceptions.BotoCoreError as exc:  # a file botocore cannot parse
            raise ConfigurationError(
                f"cannot read the AWS configuration for profile {self.name!r}: {exc}; "
                "fix the file (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE)"
            ) from None
        self.ignore_endpoints = str(flag).lower() in _TRUE if flag is not None else False


def resolve_s3(options: Mapping[str, Any]) -> S3Endpoint:
    """The endpoint, region and credentials s3fs-style ``options`` (with fsspec's
    configuration beneath them, the environment and the AWS profile) name, read once, in
    botocore's order (see the module docstring). No network I/O; a named profile that
    does not exist is a :class:`ConfigurationError`."""
    environ = os.environ
    merged = {**fsspec_defaults(), **options}
    raw_client = merged.get("client_kwargs")
    client: Mapping[str, Any] = raw_client if isinstance(raw_client, Mapping) else {}

    named = _text(merged.get("profile"))
    if named is not None:
        profile_source = _option_source("profile", options, environ)
    else:
        # botocore's order: AWS_DEFAULT_PROFILE wins over AWS_PROFILE
        variable = next((n for n in ("AWS_DEFAULT_PROFILE", "AWS_PROFILE") if environ.get(n)), None)
        profile_source = f"env {variable}" if variable else "the default profile"
    profile = _Profile(named, profile_source)
    where = f"profile {profile.name}"

    endpoint, endpoint_source = _endpoint(merged, client, options, profile, where)
    unread = None
    if endpoint is None:
        candidates = ["AWS_ENDPOINT"]
        if profile.ignore_endpoints:
            candidates[:0] = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
        unread = next((name for name in candidates if _text(environ.get(name))), None)

    region: str | None = _text(client.get("region_name"))
    region_source = "none given"
    if region is not None:
        region_source = _option_source("client_kwargs.region_name", options, environ)
    else:
        for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            if (region := _text(environ.get(variable))) is not None:
                region_source = f"env {variable}"
                break
        else:
            if (region := _text(profile.scoped.get("region"))) is not None:
                region_source = where

    verify_source = _option_source("client_kwargs.verify", options, environ)
    checksums, checksums_source = _checksums(merged, options, environ, profile, endpoint)
    return S3Endpoint(
        trust=resolve_trust(client, verify_source),
        checksums=checksums,
        checksums_source=checksums_source,
        botocore_only=_botocore_only(profile.settings, endpoint),
        endpoint_url=endpoint,
        endpoint_source=endpoint_source,
        region=region,
        region_source=region_source,
        credentials=_credentials(merged, options, environ, named),
        profile=profile.name,
        profile_source=profile.source,
        unread_endpoint=unread,
    )


def _checksums(
    merged: Mapping[str, Any],
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    profile: _Profile,
    endpoint: str | None,
) -> tuple[str, str]:
    """botocore's request checksum mode for s3fs, and why (see the module docstring)."""
    name = CHECKSUM_SETTINGS[0]
    config_kwargs = merged.get("config_kwargs")
    if isinstance(config_kwargs, Mapping) and (found := _text(config_kwargs.get(name))):
        return found, _option_source(f"config_kwargs.{name}", given, environ)
    variable = f"AWS_{name.upper()}"
    if found := _text(environ.get(variable)):
        return found, f"env {variable}"
    if found := _text(profile.scoped.get(name)):
        return found, f"profile {profile.name}"
    host = (urlsplit(endpoint).hostname or "") if endpoint is not None else ""
    if endpoint is None or host.endswith(".amazonaws.com"):
        return "when_supported", "botocore's default, on AWS"
    return _WHEN_REQUIRED, (
        "storeprobe's choice for an endpoint that is not AWS's, as S3-compatible servers "
        "refuse botocore's default aws-chunked bodies with trailing checksums"
    )


def _botocore_only(settings: Mapping[str, Any], endpoint: str | None) -> tuple[str, ...]:
    """The settings in ``settings`` that make botocore send requests elsewhere than obstore
    would, for this endpoint (None: AWS's)."""
    found: list[str] = []
    for label, value in settings.items():
        name = label.split(" ", 1)[0]
        on = str(value).lower() in _TRUE
        if name == "s3.addressing_style" and str(value).lower() == "virtual" and endpoint:
            found.append(label)  # bucket.host; obstore sends path-style to a custom endpoint
        elif name != "s3.addressing_style" and on and endpoint is None:
            found.append(label)  # s3-fips., dualstack., s3-accelerate. hosts of AWS
    return tuple(found)


def _endpoint(
    merged: Mapping[str, Any],
    client: Mapping[str, Any],
    given: Mapping[str, Any],
    profile: _Profile,
    where: str,
) -> tuple[str | None, str]:
    """The endpoint URL and its source, in botocore's order (None: AWS's own)."""
    environ = os.environ
    if (found := _text(merged.get("endpoint_url"))) is not None:
        return found, _option_source("endpoint_url", given, environ)
    if (found := _text(client.get("endpoint_url"))) is not None:
        return found, _option_source("client_kwargs.endpoint_url", given, environ)
    config_kwargs = merged.get("config_kwargs")
    ignored = isinstance(config_kwargs, Mapping) and bool(
        config_kwargs.get("ignore_configured_endpoint_urls")
    )
    if not (ignored or profile.ignore_endpoints):
        for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if (found := _text(environ.get(variable))) is not None:
                return found, f"env {variable}"
        if (found := _text(profile.services.get("endpoint_url"))) is not None:
            return found, f"{where}, services section {profile.scoped.get('services')}"
        if (found := _text(profile.scoped.get("endpoint_url"))) is not None:
            return found, where
    return None, "AWS, for the region"


def _credentials(
    merged: Mapping[str, Any],
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    named: str | None,
) -> S3Credentials:
    if merged.get("anon"):
        return S3Credentials(
            kind="anonymous", source=f"unsigned ({_option_source('anon', given, environ)})"
        )
    key, secret = merged.get("key"), merged.get("secret")
    if key and secret:
        token = merged.get("token")
        return S3Credentials(
            kind="static",
            source=_option_source("key", given, environ),
            access_key_id=str(key),
            secret_access_key=str(secret),
            session_token=str(token) if token else None,
        )
    if key or secret:
        missing = "secret" if key else "key"
        raise ConfigurationError(
            f"storage option {'key' if key else 'secret'} is given without {missing}: pass "
            "both, or neither to use botocore's credential chain (environment, profile)"
        )
    profile = f"profile {named}" if named else "AWS_PROFILE or the default profile"
    return S3Credentials(
        kind="chain",
        source=f"botocore's credential chain ({profile}), read when the first request is signed",
        profile=named,
    )
