"""Which client measures an Azure Blob URL (``abfs://``, ``abfss://``, ``az://``): obstore
when the options translate, adlfs otherwise.

This is the Azure client choice; the clients are :mod:`.obstore` (here as
:class:`.ObstoreAzureBackend`, obstore's ``AzureStore``) and :mod:`.adlfs`.

``storage_options`` are adlfs's. With ``client="auto"`` they are translated to obstore's
Azure store when obstore is installed and the options name credentials it can use
without a lookup of its own:

- ``connection_string`` (``AccountName``, ``AccountKey``, ``SharedAccessSignature``,
  ``BlobEndpoint``, ``DefaultEndpointsProtocol``, ``EndpointSuffix``,
  ``UseDevelopmentStorage``), or
- ``account_name`` with ``account_key``, ``sas_token``, the service principal
  ``tenant_id`` + ``client_id`` + ``client_secret``, or ``anon=True``;
- ``account_host`` (an endpoint's host).

Anything else makes adlfs measure, and :func:`choose_azure` says which option did:
``credential`` (an azure-identity object), no credentials at all (adlfs then asks
azure-identity's ``DefaultAzureCredential`` chain, which knows more sources than
obstore's), ``version_aware``, ``location_mode``... obstore is the default because it
moved small blobs faster than adlfs against Azurite at one stream and at four
(``benchmarks/gcs_azure_clients.py``; figures in ``docs/backends.md``).

An ``https://`` endpoint signed by a private CA: ``SSL_CERT_FILE=ca.pem``, which adlfs
(aiohttp) honours and storeprobe hands to obstore as ``root_certificate``.

A split upload through obstore is its own block upload: ``Put Block`` × N with
``max_concurrency=streams``, then ``Put Block List`` (create-only: ``If-None-Match: *``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from storeprobe.backends.obstore_stores import ObstoreAzureBackend, open_store
from storeprobe.backends.registry import REGISTRY
from storeprobe.backends.s3_trust import AZURE_CA_VARIABLES, resolve_trust
from storeprobe.errors import ConfigurationError, MissingDependencyError

__all__ = ["AZURE_CLIENTS", "choose_azure", "translate_adlfs"]

#: The clients an Azure Blob URL can be measured through.
AZURE_CLIENTS = REGISTRY.choices()["abfs"]  # from the client specs
_IGNORED = frozenset({"skip_instance_cache", "use_listings_cache"})
# adlfs options obstore's Azure store takes under another name
_ADLFS_TO_OBSTORE = {
    "account_name": "account_name",
    "account_key": "account_key",
    "tenant_id": "tenant_id",
    "client_id": "client_id",
    "client_secret": "client_secret",
}
_EMULATOR = "http://127.0.0.1:10000/devstoreaccount1"


def _connection_string(text: str) -> tuple[dict[str, Any], str | None]:
    fields = {}
    for item in text.split(";"):
        name, sep, value = item.partition("=")
        if sep:
            fields[name.strip().lower()] = value.strip()
    config: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "accountname":
            config["account_name"] = value
        elif name == "accountkey":
            config["account_key"] = value
        elif name == "sharedaccesssignature":
            config["sas_key"] = value.lstrip("?")
        elif name == "blobendpoint":
            config["endpoint"] = value.rstrip("/")
        elif name == "usedevelopmentstorage":
            if value.lower() == "true":  # Azurite's well-known account on its default port
                config["use_emulator"] = True
                config.setdefault("endpoint", _EMULATOR)
        elif name in ("defaultendpointsprotocol", "endpointsuffix") or name.endswith("endpoint"):
            continue  # the scheme and suffix are read below; other services' endpoints
        else:
            return {}, f"connection string field {name!r} has no obstore equivalent"
    if "endpoint" not in config and "account_name" in config and "use_emulator" not in config:
        scheme = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        config["endpoint"] = f"{scheme}://{config['account_name']}.blob.{suffix}"
    return config, None


def translate_adlfs(options: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """obstore's Azure config for adlfs-style ``options``, or ({}, why not)."""
    config: dict[str, Any] = {}
    for name, value in options.items():
        if name in _IGNORED:
            continue
        if name == "connection_string":
            parsed, reason = _connection_string(str(value))
            if reason is not None:
                return {}, reason
            config.update(parsed)
        elif name == "sas_token":
            config["sas_key"] = str(value).lstrip("?")
        elif name == "anon":
            if value:
                config["skip_signature"] = True
        elif name == "account_host":
            config["endpoint"] = f"https://{value}"
        elif name in _ADLFS_TO_OBSTORE:
            config[_ADLFS_TO_OBSTORE[name]] = value
        else:
            return {}, f"storage option {name!r} has no obstore equivalent"
    if "account_name" not in config and not config.get("use_emulator"):
        return {}, "no account_name (nor a connection string naming one)"
    service_principal = all(k in config for k in ("tenant_id", "client_id", "client_secret"))
    if not (
        "account_key" in config
        or "sas_key" in config
        or service_principal
        or config.get("skip_signature")
        or config.get("use_emulator")
    ):
        return {}, (
            "no account key, SAS token, service principal or anon=True: adlfs asks "
            "azure-identity's DefaultAzureCredential chain, which knows more sources than obstore"
        )
    return config, None


def choose_azure(
    protocol: str, options: Mapping[str, Any], client: str
) -> tuple[ObstoreAzureBackend | None, str]:
    """The obstore backend for an Azure Blob URL of ``protocol`` with adlfs-style
    ``options``, or None for adlfs, and why (it reads after "measured through CLIENT: ").

    ``client="auto"``: obstore when it is installed and the options translate, adlfs
    otherwise; ``"obstore"`` or ``"adlfs"`` forces one (a clear error if it cannot)."""
    if client not in AZURE_CLIENTS:
        raise ConfigurationError(
            f"client must be one of {', '.join(AZURE_CLIENTS)} for {protocol}://, not {client!r}"
        )
    if client == "adlfs":
        return None, "client='adlfs' was asked"
    if importlib.util.find_spec("obstore") is None:
        if client == "obstore":
            raise MissingDependencyError(
                "client='obstore' needs obstore, which is not installed: "
                "pip install 'storeprobe[azure]'"
            )
        return None, "obstore is not installed"
    config, reason = translate_adlfs(options)
    if reason is not None:
        if client == "obstore":
            raise ConfigurationError(
                f"client='obstore' cannot use these storage_options: {reason}; use "
                "client='adlfs', or pass a connection_string, or account_name with "
                "account_key or sas_token"
            )
        return None, reason
    trust = resolve_trust({}, "", variables=AZURE_CA_VARIABLES)  # as adlfs's aiohttp reads it
    backend = ObstoreAzureBackend(
        open_store(protocol, config, client_options=trust.obstore_options)
    )
    return backend, "client='obstore' was asked" if client == "obstore" else "the default"
