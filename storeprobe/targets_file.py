"""Named targets in ``storeprobe.toml`` (or ``[tool.storeprobe]`` of ``pyproject.toml``).

::

    [targets.wasabi]
    url = "s3://bench/probe"          # or an rclone remote path: "wasabi:bench/probe"
    client = "s3fs"                   # optional: auto, obstore, s3fs, gcsfs, adlfs
    label = "home-laptop"             # optional: the environment's name
    [targets.wasabi.options]          # optional: storage options of the URL's filesystem
    profile = "wasabi"
    client_kwargs = { region_name = "eu-central-1" }

:meth:`TargetsFile.load` reads and validates the whole file at once (with
:mod:`tomllib`): a key storeprobe does not know, a value of the wrong type, a target
without ``url`` is a :class:`~storeprobe.errors.ConfigurationError` naming the key, the
target and the file, before anything runs. Storage options may hold secrets; storeprobe
redacts them as it redacts every storage option (:mod:`storeprobe.redaction`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from storeprobe.errors import ConfigurationError
from storeprobe.named_target import NamedTarget

__all__ = ["CONFIG_NAME", "TARGET_KEYS", "TargetsFile"]

#: the file storeprobe reads from the working directory
CONFIG_NAME = "storeprobe.toml"
#: the keys a ``[targets.NAME]`` table may have
TARGET_KEYS = ("url", "options", "client", "label")
_CLIENTS = ("auto", "obstore", "s3fs", "gcsfs", "adlfs")


@attrs.frozen(kw_only=True)
class TargetsFile:
    """The named targets of one file (none when there is no file)."""

    #: the file read ("" when there was none)
    path: str = ""
    targets: Mapping[str, NamedTarget] = attrs.field(factory=dict)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None = None, *, directory: str | os.PathLike[str] = "."
    ) -> TargetsFile:
        """The targets of ``path``, else of ``storeprobe.toml`` in ``directory``, else of
        ``[tool.storeprobe]`` in its ``pyproject.toml``, else none.

        A ``path`` given must exist; a file named ``pyproject.toml`` is read from its
        ``[tool.storeprobe]`` table.
        """
        if path is not None:
            chosen = Path(path)
            if not chosen.is_file():
                raise ConfigurationError(
                    f"--config {str(chosen)!r} does not exist: give a storeprobe.toml or "
                    "pyproject.toml with [targets.NAME] tables"
                )
            return cls._read(chosen, pyproject=chosen.name == "pyproject.toml")
        here = Path(directory)
        if (here / CONFIG_NAME).is_file():
            return cls._read(here / CONFIG_NAME, pyproject=False)
        if (here / "pyproject.toml").is_file():
            found = cls._read(here / "pyproject.toml", pyproject=True, required=False)
            if found.path:
                return found
        return cls()

    @classmethod
    def _read(cls, path: Path, *, pyproject: bool, required: bool = True) -> TargetsFile:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"cannot read {str(path)!r}: {type(exc).__name__}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{str(path)!r} is not valid TOML: {exc}") from None
        table: Any = document
        where = str(path)
        if pyproject:
            table = document.get("tool", {}).get("storeprobe")
            where = f"[tool.storeprobe] of {path}"
            if table is None:
                if required:
                    raise ConfigurationError(
                        f"{str(path)!r} has no [tool.storeprobe] table: add "
                        "[tool.storeprobe.targets.NAME] tables"
                    )
                return cls()
            if not isinstance(table, dict):
                raise ConfigurationError(f"{where} must be a table")
        prefix = "tool.storeprobe." if pyproject else ""
        for key in table:
            if key != "targets":
                raise ConfigurationError(
                    f"unknown key {key!r} in {where}: it holds [{prefix}targets.NAME] tables"
                )
        targets = table.get("targets", {})
        if not isinstance(targets, dict):
            raise ConfigurationError(
                f"'targets' in {where} must be tables: write [{prefix}targets.NAME]"
            )
        return cls(
            path=str(path),
            targets={
                name: _target(name, value, where, prefix, str(path))
                for name, value in targets.items()
            },
        )


def _target(name: str, value: Any, where: str, prefix: str, source: str) -> NamedTarget:
    shown = f"[{prefix}targets.{name}] in {where}"
    if not isinstance(value, dict):
        raise ConfigurationError(f'{shown} must be a table with url = "..."')
    if not name or ":" in name or "/" in name:
        raise ConfigurationError(
            f"target name {name!r} in {where} cannot be empty or hold ':' or '/' (they would "
            "read as an rclone remote or a path): rename it"
        )
    for key in value:
        if key not in TARGET_KEYS:
            raise ConfigurationError(
                f"unknown key {key!r} in {shown}: a target has {', '.join(TARGET_KEYS)}"
            )
    url = value.get("url")
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f'{shown} needs url = "..." (e.g. "s3://bucket/dir")')
    options = value.get("options", {})
    if not isinstance(options, Mapping):
        raise ConfigurationError(
            f"options of {shown} must be a table: [{prefix}targets.{name}.options]"
        )
    client = value.get("client", "auto")
    if client not in _CLIENTS:
        raise ConfigurationError(
            f"client {client!r} of {shown} is not one of {', '.join(_CLIENTS)}"
        )
    label = value.get("label")
    if label is not None and not isinstance(label, str):
        raise ConfigurationError(f"label of {shown} must be a string")
    return NamedTarget(
        name=name, url=url, options=dict(options), client=client, label=label, source=source
    )
