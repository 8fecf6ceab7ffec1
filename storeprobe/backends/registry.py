"""Which clients storeprobe knows: one :class:`ClientSpec` per client, one :class:`Registry`.

Each client module declares its spec beside its backend (``SPEC`` in
:mod:`.s3fs`, :mod:`.obstore`, :mod:`.gcsfs`, :mod:`.adlfs`, :mod:`.sshfs`, :mod:`.local`,
:mod:`.fsspec`); the package registers them in :data:`REGISTRY`, in the order that makes
the client choices read "auto, obstore, s3fs". A spec says

- ``name``, the ``protocols`` it can measure and the ``modules`` of the fsspec
  filesystem classes it drives (how :func:`storeprobe.backends.backend_for` finds it);
- ``implements``: the protocols whose fsspec implementation it is (fsspec's
  ``url_to_fs`` opens it), and the ``extra`` that installs it;
- ``default_for``: the protocols it measures when the caller leaves ``client="auto"``;
- ``open_options``: how the caller's storage options are translated before its
  filesystem is opened (caches off, a safe default);
- ``codes``: its error codes (service codes, ``http:STATUS``, errno names; see
  :mod:`.codes`) mapped onto storeprobe's error tree, each with what to do.

Adding a client is one module: a backend (its per-kind hooks, see :mod:`.base`) and a
spec, passed to :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import fsspec
from attrs import field, frozen

from storeprobe.backends.base import AsyncBackend, Classified, SyncBackend
from storeprobe.backends.codes import codes_of

__all__ = ["REGISTRY", "ClientSpec", "Registry", "no_listings_cache", "register", "unregister"]


def _frozen_codes(codes: Mapping[str, Classified]) -> Mapping[str, Classified]:
    return MappingProxyType(dict(codes))


@frozen(kw_only=True)
class ClientSpec:
    """One client: what it measures, how it is installed, chosen and opened, and what its
    error codes mean (see the module docstring)."""

    name: str
    #: the backend that drives a filesystem of this client
    backend: Callable[[fsspec.AbstractFileSystem], AsyncBackend | SyncBackend]
    #: modules of the fsspec filesystem classes this client drives (prefixes)
    modules: tuple[str, ...]
    protocols: tuple[str, ...]
    implements: tuple[str, ...] = ()
    extra: str | None = None
    default_for: tuple[str, ...] = ()
    #: ``(protocol, options) -> options`` as the client's filesystem is opened with
    open_options: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    codes: Mapping[str, Classified] = field(factory=dict, converter=_frozen_codes)

    def classify(self, exc: BaseException) -> Classified | None:
        """The error class and fix of the first code of ``exc`` (its own, not those of
        the errors behind it) this client maps."""
        for code in codes_of(exc, chain=False):
            if code in self.codes:
                return self.codes[code]
        return None


class Registry:
    """The clients storeprobe can measure through; later registrations take precedence
    for the filesystem classes they drive."""

    def __init__(self) -> None:
        self._specs: list[ClientSpec] = []

    @property
    def specs(self) -> tuple[ClientSpec, ...]:
        """Every registered spec, in registration order."""
        return tuple(self._specs)

    def register(self, spec: ClientSpec) -> None:
        """Add ``spec``; a name already registered is a :class:`ValueError`."""
        if any(known.name == spec.name for known in self._specs):
            raise ValueError(f"a client named {spec.name!r} is already registered")
        self._specs.append(spec)

    def unregister(self, name: str) -> None:
        """Remove the client ``name`` (a :class:`KeyError` if there is none)."""
        for index, known in enumerate(self._specs):
            if known.name == name:
                del self._specs[index]
                return
        raise KeyError(name)

    def for_fs(self, fs: fsspec.AbstractFileSystem) -> ClientSpec | None:
        """The spec of the client that drives ``fs`` (by its class's module), or None."""
        module = type(fs).__module__
        for spec in reversed(self._specs):
            if any(module.startswith(prefix) for prefix in spec.modules):
                return spec
        return None

    def serving(self, protocol: str) -> tuple[ClientSpec, ...]:
        """The clients that can measure ``protocol://`` URLs, in registration order."""
        return tuple(spec for spec in self._specs if protocol in spec.protocols)

    def choices(self) -> dict[str, tuple[str, ...]]:
        """``client=`` values for each protocol that more than one client measures."""
        table: dict[str, tuple[str, ...]] = {}
        for spec in self._specs:
            for protocol in spec.protocols:
                names = [each.name for each in self.serving(protocol)]
                if len(names) > 1:
                    table[protocol] = ("auto", *names)
        return table

    def default(self, protocol: str) -> ClientSpec | None:
        """The client ``client="auto"`` prefers for ``protocol``, or None."""
        return next((s for s in self._specs if protocol in s.default_for), None)

    def implementation(self, protocol: str) -> ClientSpec | None:
        """The client that is ``protocol``'s fsspec implementation, or None."""
        return next((s for s in reversed(self._specs) if protocol in s.implements), None)

    def extras(self) -> dict[str, str]:
        """The storeprobe extra that installs each protocol's fsspec implementation."""
        return {
            protocol: spec.extra
            for spec in self._specs
            if spec.extra is not None
            for protocol in spec.implements
        }

    def open_options(self, protocol: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` as the implementation of ``protocol`` is opened with."""
        opened = dict(options)
        spec = self.implementation(protocol)
        if spec is not None and spec.open_options is not None:
            opened = spec.open_options(protocol, opened)
        return opened


#: the clients storeprobe knows (filled by :mod:`storeprobe.backends`)
REGISTRY = Registry()


def register(spec: ClientSpec) -> None:
    """Add a client to :data:`REGISTRY` (see :meth:`Registry.register`)."""
    REGISTRY.register(spec)


def unregister(name: str) -> None:
    """Remove a client from :data:`REGISTRY` (see :meth:`Registry.unregister`)."""
    REGISTRY.unregister(name)


def no_listings_cache(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """Options with fsspec's listings cache off, unless the caller set it."""
    return {"use_listings_cache": False, **options}
