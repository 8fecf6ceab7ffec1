"""What a target given on the command line names: a URL, a ``storeprobe.toml`` target,
or an rclone remote.

:func:`resolve` decides, in this order:

1. anything with ``://`` is a URL (``s3://``, ``file://``, ``memory://``): as given;
2. a name of ``storeprobe.toml`` (:class:`~storeprobe.targets_file.TargetsFile`) is that
   target; its ``url`` may itself be an rclone remote path, resolved as in 3 (the
   target's options, client and label win over the remote's);
3. ``NAME:PATH`` where ``NAME`` is an rclone remote
   (:class:`~storeprobe.rclone_config.RcloneConfig`) is that remote;
4. ``NAME:PATH`` where ``NAME`` is neither a remote nor a protocol fsspec knows (nor a
   one-letter drive) is refused with a :class:`ConfigurationError` naming the remote and
   the fix;
5. anything else (a local path, ``s3:/bucket`` with one slash) is left to
   :meth:`storeprobe.Target.from_url`, which opens or refuses it as before.

rclone's configuration is read only when a target looks like ``NAME:PATH``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import fsspec
from fsspec.registry import known_implementations

from storeprobe.errors import ConfigurationError
from storeprobe.named_target import NamedTarget
from storeprobe.rclone_config import RcloneConfig, split_remote
from storeprobe.targets_file import TargetsFile

__all__ = ["resolve"]


def _is_protocol(name: str) -> bool:
    return name in known_implementations or name in fsspec.available_protocols()


def resolve(
    spec: str, targets: TargetsFile, rclone: Callable[[], RcloneConfig]
) -> NamedTarget | None:
    """The named target ``spec`` is, or None where it is a URL or a path as given.

    ``rclone`` returns rclone's configuration (called only for ``NAME:PATH``).
    """
    if "://" in spec:
        return None
    named = targets.targets.get(spec)
    if named is not None:
        if split_remote(named.url) is None or "://" in named.url:
            return named
        remote = rclone().target(named.url)
        return attrs.evolve(
            remote,
            name=named.name,
            options={**remote.options, **named.options},
            client=named.client,
            label=named.label,
            source=f"{named.source}, {remote.source}",
        )
    split = split_remote(spec)
    if split is None:
        return None
    name, _ = split
    config = rclone()
    if name in config:
        return config.target(spec)
    if _is_protocol(name) or len(name) == 1:
        return None
    if config.encrypted:
        return config.target(spec)  # refused, saying the file is encrypted
    known = ", ".join(sorted(targets.targets)) or "none"
    raise ConfigurationError(
        f"{spec!r} is neither a URL nor a named target: no rclone remote {name!r} in "
        f"{config.path!r} (its remotes: {', '.join(config.names) or 'none'}), no target "
        f"{spec!r} in {targets.path or 'storeprobe.toml'} (its targets: {known}). Add the "
        "remote with 'rclone config', point RCLONE_CONFIG (or --rclone-config) at the file "
        "that has it, or write a URL such as s3://bucket/dir"
    )
