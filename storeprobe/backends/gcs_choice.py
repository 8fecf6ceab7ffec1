"""Which client measures a ``gs://`` URL: gcsfs by default, obstore when asked.

This is the GCS client choice; the clients are :mod:`.gcsfs` and :mod:`.obstore` (here
as :class:`.ObstoreGCSBackend`, obstore's ``GCSStore``, which speaks GCS's XML API).

gcsfs is the default, and ``client="obstore"`` chooses obstore. The default is gcsfs
because obstore could not be measured against a GCS server here: the emulator the tests
run (gcp-storage-emulator) serves only GCS's JSON API, and obstore speaks the XML API
(what it refuses is listed in ``docs/backends.md``). The S3 figures do not carry over
without a measurement. gcsfs splits one object's upload too: see :mod:`.gcsfs`
(a parallel composite upload).

``storage_options`` are gcsfs's. They translate to obstore's GCS store when they say:

- ``endpoint_url`` (else ``STORAGE_EMULATOR_HOST``; else Google's);
- ``token``: ``None`` or ``"google_default"`` (application default credentials: the
  ``GOOGLE_APPLICATION_CREDENTIALS`` file, gcloud's, the metadata server), a path to a
  JSON key file (service account or authorized user), a service-account key as a dict,
  a raw OAuth access token (a string that is not a file), or ``"anon"`` (reads unsigned;
  obstore still sends a placeholder bearer token with writes);
- ``project`` (not needed for object requests: ignored).

``client="obstore"`` with any other option (``requester_pays``, ``version_aware``,
``token="cloud"`` or ``"browser"``, a credentials object, ``session_kwargs``...) is
refused with the option's name: obstore has no equivalent.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from typing import Any

from storeprobe.backends.obstore_stores import ObstoreGCSBackend, open_store
from storeprobe.backends.registry import REGISTRY
from storeprobe.errors import ConfigurationError, MissingDependencyError

__all__ = ["GCS_CLIENTS", "choose_gcs", "translate_gcsfs"]

#: The clients a ``gs://`` URL can be measured through.
GCS_CLIENTS = REGISTRY.choices()["gs"]  # from the client specs
_IGNORED = frozenset({"skip_instance_cache", "use_listings_cache", "project"})
#: what obstore sends as the bearer token of an anonymous write (GCS refuses both alike)
_ANONYMOUS = "anonymous"


def _anonymous() -> dict[str, Any]:
    return {"token": _ANONYMOUS, "expires_at": None}


def translate_gcsfs(
    options: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """obstore's GCS config (and store keywords) for gcsfs-style ``options``, or why not."""
    config: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value in options.items():
        if name in _IGNORED:
            continue
        if name == "endpoint_url":
            config["base_url"] = str(value).rstrip("/")
        elif name == "token":
            if value is None or value == "google_default":
                continue
            if value == "anon":
                config["skip_signature"] = True
                extra["credential_provider"] = _anonymous
            elif isinstance(value, Mapping) and value.get("type") == "service_account":
                config["service_account_key"] = json.dumps(dict(value))
            elif isinstance(value, str) and value not in ("cloud", "browser", "cache"):
                if os.path.exists(value):
                    config["application_credentials"] = value
                else:
                    config["bearer_token"] = value
            else:
                shown = value if isinstance(value, str) else type(value).__name__
                return {}, {}, f"token {shown!r} has no obstore equivalent"
        else:
            return {}, {}, f"storage option {name!r} has no obstore equivalent"
    if "base_url" not in config and (host := os.environ.get("STORAGE_EMULATOR_HOST")):
        config["base_url"] = host if "://" in host else f"http://{host}"
    return config, extra, None


def choose_gcs(options: Mapping[str, Any], client: str) -> tuple[ObstoreGCSBackend | None, str]:
    """The obstore backend for a ``gs://`` URL with gcsfs-style ``options``, or None for
    gcsfs, and why (it reads after "measured through CLIENT: ").

    ``client="auto"`` and ``"gcsfs"``: gcsfs; ``"obstore"``: obstore, or a clear error
    naming the option it cannot take."""
    if client not in GCS_CLIENTS:
        raise ConfigurationError(
            f"client must be one of {', '.join(GCS_CLIENTS)} for gs://, not {client!r}"
        )
    if client == "gcsfs":
        return None, "client='gcsfs' was asked"
    if client == "auto":
        return None, "the default for gs:// (obstore's GCS path is chosen with client='obstore')"
    if importlib.util.find_spec("obstore") is None:
        raise MissingDependencyError(
            "client='obstore' needs obstore, which is not installed: "
            "pip install 'storeprobe[obstore]'"
        )
    config, extra, reason = translate_gcsfs(options)
    if reason is not None:
        raise ConfigurationError(
            f"client='obstore' cannot use these storage_options: {reason}; use client='gcsfs'"
        )
    return ObstoreGCSBackend(open_store("gs", config, **extra)), "client='obstore' was asked"
