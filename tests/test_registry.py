"""A client is one module: one defined only in this file, registered through the public
registry, measures a real probe; the registry's tables are what the choices read; error
codes are read from the exceptions clients raise, through their causes."""

from __future__ import annotations

import errno
from collections import Counter

import botocore.exceptions
import pytest

from storeprobe import Probe, Workload
from storeprobe.backends import (
    REGISTRY,
    Capabilities,
    ClientSpec,
    Landing,
    SyncBackend,
    register,
    unregister,
)
from storeprobe.backends.client_choice import CLIENTS
from storeprobe.backends.codes import codes_of
from storeprobe.errors import ConfigurationError, TargetNotFoundError
from storeprobe.request import Body, Kind, Outcome, Request, SyncJob
from storeprobe.target import EXTRAS, translate_error
from storeprobe.transfer import Clock

CALLS: Counter[Kind] = Counter()


# --- the whole client: fsspec's memory:// through its store, one hook per request kind ---
class StoreBackend(SyncBackend):
    """``memory://`` through the filesystem's dict: create-only puts, ranged gets."""

    name = "memory-store"
    capabilities = Capabilities()

    def check_root(self, root: str) -> None:
        return None  # memory directories are implicit

    def put(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        assert isinstance(body, bytes | bytearray | memoryview)  # what body() made
        store, key, data = self.fs.store, self.fs._strip_protocol(request.key), bytes(body)

        def put() -> Outcome:
            CALLS[Kind.PUT] += 1
            if key in store:
                raise FileExistsError(key)
            self.fs.pipe_file(key, data)
            return Outcome(sent=len(data))

        return SyncJob(Kind.PUT, put)

    def get(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, key, start, stop = self.fs, request.key, request.start, request.stop

        def get() -> Outcome:
            CALLS[Kind.GET] += 1
            data = fs.cat_file(key, start=start, end=stop)
            return Outcome(received=len(data), data=data)

        return SyncJob(Kind.GET, get)

    def delete(self, request: Request, body: Body | None, into: Landing, clock: Clock) -> SyncJob:
        fs, key = self.fs, request.key

        def delete() -> Outcome:
            CALLS[Kind.DELETE] += 1
            fs.rm_file(key)
            return Outcome()

        return SyncJob(Kind.DELETE, delete)


SPEC = ClientSpec(
    name="memory-store",
    backend=StoreBackend,
    modules=("fsspec.implementations.memory",),
    protocols=("memory",),
    implements=("memory",),
)
# --- end of the client ---------------------------------------------------------------------


def test_a_client_defined_in_this_file_measures_a_real_probe() -> None:
    CALLS.clear()
    register(SPEC)
    try:
        probe = Probe.from_url("memory://registry-client", streams=2, repeats=2)
        assert probe.target.client == "memory-store"
        workload = Workload(count=8, size="4KiB")
        up, down = probe.upload(workload), probe.download(workload)
    finally:
        unregister("memory-store")
    assert up.ok, up.errors
    assert down.ok, down.errors  # verified: every byte read back is the one written
    assert up.backend == down.backend == "memory-store"
    assert len(up.samples) == len(down.samples) == 2
    # 2 upload repeats + 2 untimed setup uploads for the download, 8 objects each
    assert CALLS[Kind.PUT] == 4 * 8
    assert CALLS[Kind.GET] == 2 * 8
    assert CALLS[Kind.DELETE] == 4 * 8  # everything written was cleaned up
    # unregistered: memory:// is fsspec's own memory backend again
    assert Probe.from_url("memory://registry-client").target.client != "memory-store"


def test_a_request_the_client_has_no_hook_for_is_refused_clearly() -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    backend = StoreBackend(MemoryFileSystem())
    with pytest.raises(ConfigurationError, match="cannot make head requests"):
        backend.job(Request(kind=Kind.HEAD, key="x"), None, None, lambda: 0)
    with pytest.raises(ConfigurationError, match="cannot make create-multipart requests"):
        backend.bind([[Request(kind=Kind.CREATE_MULTIPART, key="x")]], [None], [None], lambda: 0)


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(REGISTRY.specs[0])
    with pytest.raises(KeyError):
        unregister("no-such-client")


def test_the_choice_and_extra_tables_come_from_the_specs() -> None:
    assert CLIENTS == {
        "s3": ("auto", "obstore", "s3fs"),
        "s3a": ("auto", "obstore", "s3fs"),
        "gs": ("auto", "obstore", "gcsfs"),
        "gcs": ("auto", "obstore", "gcsfs"),
        "abfs": ("auto", "obstore", "adlfs"),
        "abfss": ("auto", "obstore", "adlfs"),
        "az": ("auto", "obstore", "adlfs"),
    }
    picked = {p: EXTRAS[p] for p in ("s3", "gs", "sftp", "abfs", "adl")}
    assert picked == {"s3": "s3", "gs": "gcs", "sftp": "ssh", "abfs": "azure", "adl": "azure"}
    defaults = {p: getattr(REGISTRY.default(p), "name", None) for p in ("s3", "gs", "az", "sftp")}
    assert defaults == {"s3": "obstore", "gs": "gcsfs", "az": "obstore", "sftp": None}


def test_codes_are_read_through_the_causes() -> None:
    client_error = botocore.exceptions.ClientError(
        {"Error": {"Code": "NoSuchBucket"}, "ResponseMetadata": {"HTTPStatusCode": 404}},
        "GetObject",
    )
    try:
        try:
            raise client_error
        except botocore.exceptions.ClientError as exc:
            raise OSError(errno.EIO, "something failed") from exc
    except OSError as outer:
        wrapped = outer
    assert codes_of(wrapped) == ("EIO", "NoSuchBucket", "http:404")
    assert codes_of(wrapped, chain=False) == ("EIO",)
    # the code, not the message, makes it a missing bucket
    assert isinstance(translate_error(wrapped, "reading", str), TargetNotFoundError)
    silent = OSError(errno.EIO, "NoSuchBucket mentioned in passing")
    assert not isinstance(translate_error(silent, "reading", str), TargetNotFoundError)
