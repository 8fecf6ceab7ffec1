"""The heap is trimmed after a large window only, and where the C library cannot trim
nothing is called: :mod:`storeprobe.heap`. (How much memory a trim gives back is a figure
of ``benchmarks/heap_trim.py``, not of a test.)"""

from __future__ import annotations

import platform

import pytest

from storeprobe import heap


def test_this_machine_trims_where_its_c_library_is_glibc() -> None:
    assert heap.trims() == (platform.libc_ver()[0] == "glibc")


def test_a_small_window_is_not_followed_by_a_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "_malloc_trim", lambda: calls.append)
    assert heap.release(heap.TRIM_ABOVE - 1) is False
    assert calls == []
    assert heap.release(heap.TRIM_ABOVE) is True
    assert calls == [0]  # pad 0: trim every arena as far as it goes


def test_without_malloc_trim_release_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.trims() is False
    assert heap.release(1 << 30) is False
