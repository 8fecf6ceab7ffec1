"""A probe call's repeats take their bodies and landings from one buffer (storeprobe.arena):
allocated once per call where the client sends from (or reads into) a view, released
before a window whose reads the client allocates itself, zeroed before reads land in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem

import storeprobe.measurement
from storeprobe import Probe, Workload
from storeprobe.arena import Arena
from tests.conftest import obstore_fs
from tests.servers import Server


class _Counted(Arena):
    """An arena that counts the buffers it makes (a new one: a larger size asked)."""

    made: list[int] = []  # noqa: RUF012 - one list per test (reset by the fixture)

    def take(self, size: int) -> memoryview:
        if self.size < size:
            _Counted.made.append(size)
        return super().take(size)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    _Counted.made = []
    monkeypatch.setattr(storeprobe.measurement, "Arena", _Counted)
    return _Counted.made


def test_take_reuses_one_buffer_and_zeroed_clears_it() -> None:
    arena = Arena()
    first = arena.take(1000)
    first[:] = b"\x07" * 1000
    again = arena.take(600)
    assert again.obj is first.obj  # the same buffer, not a fresh one
    assert bytes(again[:3]) == b"\x07\x07\x07"  # contents kept: a caller fills every byte
    assert not np.frombuffer(arena.zeroed(1000), dtype=np.uint8).any()
    larger = arena.take(2000)
    assert larger.obj is not first.obj
    assert arena.size == 2000
    arena.release()
    assert arena.size == 0
    with pytest.raises(ValueError, match="0 or more bytes"):
        arena.take(-1)


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_a_local_probe_calls_repeats_share_one_buffer(
    operation: str, tmp_path: Path, counted: list[int]
) -> None:
    """The local disk sends from views and reads into them: three repeats (and one
    warm-up), each with bytes of its own, verified, make one buffer of the workload's size."""
    workload = Workload(count=3, size=1 << 20, seed=4)
    probe = Probe(LocalFileSystem(), str(tmp_path), repeats=3, warmup=1)
    result = probe.measure(operation, workload)  # type: ignore[arg-type]
    assert not result.errors, result.errors
    assert len(result.samples) == 3
    assert counted == [workload.total_bytes]


def test_an_obstore_download_lets_the_setup_buffer_go_before_its_window(
    s3_server: Server, counted: list[int]
) -> None:
    """obstore allocates what it reads: the setup upload's buffer is released before each
    window (memory holds one of the two, as checked), so each repeat makes one again,
    while an upload's repeats share one."""
    fs: Any = obstore_fs(s3_server.endpoint)
    workload = Workload(count=2, size=1 << 20, seed=9)
    uploaded = Probe(fs, "bench/arena", repeats=3).upload(workload)
    assert not uploaded.errors, uploaded.errors
    assert counted == [workload.total_bytes]
    counted.clear()
    downloaded = Probe(fs, "bench/arena", repeats=3).download(workload)
    assert not downloaded.errors, downloaded.errors
    assert counted == [workload.total_bytes] * 3


def test_a_failed_window_lets_its_buffer_go(
    tmp_path: Path, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request a failed window gave up on may still use its buffer (a client thread
    nothing can stop): the repeat after it takes a new one, and the failure is recorded."""
    execute = storeprobe.measurement.Measurement._execute
    calls = [0]

    def failing_first(self: Any, backend: Any, plan: Any, **kwargs: Any) -> Any:
        if kwargs.get("timed"):
            calls[0] += 1
            if calls[0] == 1:
                raise OSError("injected: the first window fails")
        return execute(self, backend, plan, **kwargs)

    monkeypatch.setattr(storeprobe.measurement.Measurement, "_execute", failing_first)
    workload = Workload(count=2, size=1 << 20, seed=5)
    result = Probe(LocalFileSystem(), str(tmp_path), repeats=3).upload(workload)
    assert [e.repeat for e in result.errors] == [1]
    assert len(result.samples) == 2
    assert counted == [workload.total_bytes] * 2  # one before the failure, one after
