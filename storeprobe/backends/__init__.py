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

:func:`backend_for` picks the backend of a filesystem by its class; the client choice
for a URL whose protocol has two (obstore or s3fs for ``s3://``, gcsfs or obstore for
``gs://``, obstore or adlfs for Azure) is in :mod:`storeprobe.backends.client_choice`, and
obstore's GCS and Azure backends in :mod:`storeprobe.backends.obstore_stores`.
To add a client: write one module with a subclass of :class:`AsyncBackend` or
:class:`SyncBackend` (its name, protocols, extra, capabilities, ``job`` for each
request kind it makes, ``classify`` for its errors) and one line in the table
``_BY_MODULE`` that :func:`backend_for` reads.
"""

from __future__ import annotations

import fsspec
from fsspec.asyn import AsyncFileSystem

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
from storeprobe.backends.fsspec import FsspecAsyncBackend, FsspecSyncBackend, MemoryBackend
from storeprobe.backends.gcsfs import GCSBackend
from storeprobe.backends.local import LocalBackend, evict_from_page_cache
from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.backends.s3fs import S3Backend
from storeprobe.backends.sshfs import SFTPBackend

__all__ = [
    "AsyncBackend",
    "AsyncBound",
    "AzureBackend",
    "Backend",
    "Capabilities",
    "FsspecAsyncBackend",
    "FsspecSyncBackend",
    "GCSBackend",
    "Landing",
    "LocalBackend",
    "MemoryBackend",
    "ObstoreBackend",
    "S3Backend",
    "SFTPBackend",
    "SyncBackend",
    "SyncBound",
    "backend_for",
    "evict_from_page_cache",
]

# the module an fsspec filesystem class comes from → its backend
_BY_MODULE: tuple[tuple[str, type[AsyncBackend] | type[SyncBackend]], ...] = (
    ("s3fs", S3Backend),
    ("obstore", ObstoreBackend),
    ("gcsfs", GCSBackend),
    ("adlfs", AzureBackend),
    ("sshfs", SFTPBackend),
    ("fsspec.implementations.local", LocalBackend),
    ("fsspec.implementations.memory", MemoryBackend),
)


def backend_for(fs: fsspec.AbstractFileSystem) -> AsyncBackend | SyncBackend:
    """The backend for ``fs``, by its class (s3fs, obstore, gcsfs, adlfs, sshfs, local,
    memory), else the generic asynchronous or synchronous fsspec backend."""
    module = type(fs).__module__
    for prefix, backend in _BY_MODULE:
        if module.startswith(prefix):
            return backend(fs)
    if isinstance(fs, AsyncFileSystem):
        return FsspecAsyncBackend(fs)
    return FsspecSyncBackend(fs)
