"""The backup methods by name: what ``method="..."`` and ``--method`` accept."""

from __future__ import annotations

import attrs

from storeprobe.backup.chunks import Chunks
from storeprobe.backup.duplicacy import Duplicacy
from storeprobe.backup.duplicity import Duplicity
from storeprobe.backup.files import Files
from storeprobe.backup.method import BackupMethod
from storeprobe.backup.rdiff_backup import RdiffBackup
from storeprobe.backup.restic import Restic
from storeprobe.backup.rsnapshot import Rsnapshot
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import Chunking

__all__ = ["METHODS", "method_for"]

_REGISTRY: dict[str, type[BackupMethod]] = {
    Files.name: Files,
    Restic.name: Restic,
    Duplicity.name: Duplicity,
    Chunks.name: Chunks,
    RdiffBackup.name: RdiffBackup,
    Rsnapshot.name: Rsnapshot,
    Duplicacy.name: Duplicacy,
}

#: every method name, in the order the docs present them
METHODS: tuple[str, ...] = tuple(_REGISTRY)


def _named(name: str, chunk_size: int | str | None) -> BackupMethod:
    try:
        kind = _REGISTRY[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown backup method {name!r}: choose one of {', '.join(METHODS)}"
        ) from None
    if chunk_size is None or "chunking" not in attrs.fields_dict(kind):  # type: ignore[arg-type]
        return kind()  # a method that cuts no chunks has no chunk size to set
    return kind(chunking=Chunking.of(chunk_size))  # type: ignore[call-arg]


def method_for(
    method: str | BackupMethod, target_protocol: str, *, chunk_size: int | str | None = None
) -> BackupMethod:
    """The method named ``method`` with its defaults (its average chunk size
    ``chunk_size`` where given and the method cuts chunks; other methods have none to
    set), or ``method`` itself; checked against the target's protocol before any I/O."""
    if isinstance(method, str):
        chosen = _named(method, chunk_size)
    elif isinstance(method, BackupMethod):
        chosen = method
    else:
        raise ConfigurationError(
            f"method must be a method name ({', '.join(METHODS)}) or a BackupMethod, "
            f"not {type(method).__name__}"
        )
    if chosen.protocols and target_protocol not in chosen.protocols:
        raise ConfigurationError(
            f"the {chosen.name} method ({chosen.tool}) runs on "
            f"{', '.join(p + '://' for p in chosen.protocols)} targets only, not "
            f"{target_protocol}://: choose one of those targets or another method"
        )
    return chosen
