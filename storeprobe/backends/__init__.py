"""How one request is made on each kind of storage client: one module per client family.

    =================  =========  =============================  ===========================
    backend (module)   extra      one object, upload             one object, download
    =================  =========  =============================  ===========================
    ``local``          (core)     ``pwrite`` of parts, fsync     ``pread`` of ranges
    ``memory`` /       (core)     one request (cannot split)     ranged reads in parallel
    any sync fsspec
    any async fsspec   (core)     one request (cannot split)     ranged reads in parallel
    ``s3fs``           ``s3``     multipart, parts in parallel   ranged GETs in parallel
    ``obstore``        ``s3``     obstore's multipart, N parts   ranged GETs (s3fs where the
                                                                 server answers 200)
    ``gcsfs``          ``gcs``    parallel composite upload      ranged GETs in parallel
    ``adlfs``          ``azure``  staged blocks in parallel      ranged GETs in parallel
    ``sshfs``          ``ssh``    parts at offsets, N channels   ranged reads, N channels
    =================  =========  =============================  ===========================

:func:`backend_for` picks the backend of a filesystem by its class, from the client specs
in :data:`REGISTRY` (:mod:`storeprobe.backends.registry`); the client choice for a URL
whose protocol has two (obstore or s3fs for ``s3://``, gcsfs or obstore for ``gs://``,
obstore or adlfs for Azure) is in :mod:`storeprobe.backends.client_choice`, and obstore's
GCS and Azure backends in :mod:`storeprobe.backends.obstore_stores`.

To add a client, write one module: a subclass of :class:`AsyncBackend` or
:class:`SyncBackend` (its name, capabilities, the per-kind hooks of the requests it makes,
an upload object if it splits uploads in steps) and a :class:`ClientSpec` (protocols,
extra, default, option translation, error codes), passed to :func:`register`.
"""

from __future__ import annotations

import fsspec
from fsspec.asyn import AsyncFileSystem

from storeprobe.backends.adlfs import SPEC as ADLFS
from storeprobe.backends.adlfs import AzureBackend
from storeprobe.backends.base import (
    AsyncBackend,
    AsyncBound,
    Backend,
    Capabilities,
    Landing,
    SyncBackend,
    SyncBound,
)
from storeprobe.backends.fsspec import (
    HTTP,
    MEMORY,
    FsspecAsyncBackend,
    FsspecSyncBackend,
    MemoryBackend,
)
from storeprobe.backends.gcsfs import SPEC as GCSFS
from storeprobe.backends.gcsfs import GCSBackend
from storeprobe.backends.local import SPEC as LOCAL
from storeprobe.backends.local import LocalBackend, evict_from_page_cache
from storeprobe.backends.obstore import SPEC as OBSTORE
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.backends.registry import REGISTRY, ClientSpec, Registry, register, unregister
from storeprobe.backends.s3fs import SPEC as S3FS
from storeprobe.backends.s3fs import S3Backend
from storeprobe.backends.sshfs import SPEC as SSHFS
from storeprobe.backends.sshfs import SFTPBackend

__all__ = [
    "REGISTRY",
    "AsyncBackend",
    "AsyncBound",
    "AzureBackend",
    "Backend",
    "Capabilities",
    "ClientSpec",
    "FsspecAsyncBackend",
    "FsspecSyncBackend",
    "GCSBackend",
    "Landing",
    "LocalBackend",
    "MemoryBackend",
    "ObstoreBackend",
    "Registry",
    "S3Backend",
    "SFTPBackend",
    "SyncBackend",
    "SyncBound",
    "backend_for",
    "evict_from_page_cache",
    "register",
    "unregister",
]

for _spec in (OBSTORE, S3FS, GCSFS, ADLFS, SSHFS, LOCAL, MEMORY, HTTP):
    register(_spec)


def backend_for(fs: fsspec.AbstractFileSystem) -> AsyncBackend | SyncBackend:
    """The backend for ``fs``: that of the registered client that drives its class
    (s3fs, obstore, gcsfs, adlfs, sshfs, local, memory...), else the generic
    asynchronous or synchronous fsspec backend."""
    spec = REGISTRY.for_fs(fs)
    if spec is not None:
        return spec.backend(fs)
    if isinstance(fs, AsyncFileSystem):
        return FsspecAsyncBackend(fs)
    return FsspecSyncBackend(fs)
