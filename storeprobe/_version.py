"""The installed version, in a module of its own so that no module imports the package
``storeprobe`` itself (which would hide an import cycle through ``__init__``).

The version comes from git tags when the package is built (hatch-vcs, see
``[tool.hatch.version]`` in pyproject.toml) and is read here from the installed
distribution's metadata; no version file is generated into the package. An editable
install reports the version of its last ``pip install -e .``. Imported from a source
tree that is not installed at all, it is ``0+unknown``.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]

try:
    __version__ = importlib.metadata.version("storeprobe")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source checkout
    __version__ = "0+unknown"
