"""A target with a name: a URL, its storage options, a client and a label, read from a file.

:class:`NamedTarget` is what a ``[targets.NAME]`` table of ``storeprobe.toml``
(:mod:`storeprobe.targets_file`) or an rclone remote (:mod:`storeprobe.rclone_config`)
becomes. It is plain data: opening it is :meth:`storeprobe.Probe.from_url` with its
``url``, ``options`` and ``client``. Its ``repr`` shows the option names only, never
their values, because the options hold the secrets the file held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from storeprobe.redaction import redact_url

__all__ = ["NamedTarget"]


@attrs.frozen(kw_only=True)
class NamedTarget:
    """A storage target named in a file: where it is, how to open it, where it came from."""

    #: the name it is called by (``wasabi`` for ``wasabi:bench/x``; a table's name)
    name: str
    #: an fsspec URL (``s3://bench/x``, ``sftp://host/dir``, ``file:///mnt/disk``)
    url: str
    #: storage options for the URL's filesystem (secrets included: never print them)
    options: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    #: the client for protocols that have two (``"auto"``, ``"obstore"``, ``"s3fs"``...)
    client: str = "auto"
    #: a label for the environment (None: the command's ``--label`` or none)
    label: str | None = None
    #: the file it was read from (``~/.config/rclone/rclone.conf``, ``storeprobe.toml``)
    source: str = ""
    #: what storeprobe decided on the file's behalf, one sentence each (an endpoint taken
    #: from rclone's provider preset, rclone options that do not apply to a probe)
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.options))
        return (
            f"NamedTarget(name={self.name!r}, url={redact_url(self.url)!r}, options=<{names}>, "
            f"client={self.client!r}, label={self.label!r}, source={self.source!r})"
        )
