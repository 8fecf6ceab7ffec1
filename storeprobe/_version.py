"""The installed version, in a module of its own so that no module imports the package
``storeprobe`` itself (which would hide an import cycle through ``__init__``)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]

try:
    __version__ = importlib.metadata.version("storeprobe")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source checkout
    __version__ = "0+unknown"
