"""Staging a large object through a local file: contents, release, cleanup, memory bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import namedtuple
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from storeprobe import ConfigurationError, Probe, Workload
from storeprobe.staging import Staging
from storeprobe.units import MiB

WORKLOAD = Workload(count=1, size="5MiB", seed=7)


def test_payload_is_staged_byte_for_byte(tmp_path: Path) -> None:
    staging = Staging.of_payload(WORKLOAD, 0, str(tmp_path))
    try:
        assert Path(staging.path).stat().st_size == WORKLOAD.size
        assert bytes(staging.part(0, WORKLOAD.size)) == bytes(WORKLOAD.payload(0))
        assert b"".join(chunk for _, chunk in staging.chunks()) == bytes(WORKLOAD.payload(0))
    finally:
        staging.close()
    assert list(tmp_path.iterdir()) == []  # deleted on close


def test_released_pages_keep_their_data(tmp_path: Path) -> None:
    staging = Staging.blank(3 * MiB, str(tmp_path))
    try:
        staging.part(MiB, 2 * MiB)[:] = b"\xab" * MiB
        staging.release(MiB, 2 * MiB)  # unmapped from the process, kept by the file
        assert bytes(staging.part(MiB, MiB + 4)) == b"\xab" * 4
        assert os.pread(staging.fd, 4, 2 * MiB - 4) == b"\xab" * 4
        assert os.pread(staging.fd, 4, 0) == bytes(4)
    finally:
        staging.close()


def test_close_with_a_view_still_held_deletes_the_file(tmp_path: Path) -> None:
    staging = Staging.blank(MiB, str(tmp_path))
    held = staging.part(0, 16)
    staging.close()
    assert list(tmp_path.iterdir()) == []
    assert bytes(held) == bytes(16)  # the mapping lives as long as the view


def test_not_enough_disk_space_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda _: usage(10 * MiB, 9 * MiB, MiB))
    with pytest.raises(ConfigurationError, match="TMPDIR"):
        Staging(64 * MiB)


def test_stage_above_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="stage_above"):
        Probe.from_url("memory://x", stage_above=0)
    assert Probe.from_url("memory://x", stage_above="2GiB").stage_above == 2 * 1024**3


def test_a_verification_failure_in_a_staged_download_is_caught(tmp_path: Path) -> None:
    (tmp_path / "disk").mkdir()
    probe = Probe.from_url(str(tmp_path / "disk"), streams=4, repeats=1, stage_above="4MiB")
    backend = probe.target.backend
    original = backend.after_upload

    def corrupt(paths: Sequence[str], *, synced: Collection[str] = ()) -> None:
        original(paths, synced=synced)
        with open(paths[0], "r+b") as handle:  # flip the byte: it differs whatever the seed
            handle.seek(9 * MiB + 5)
            byte = handle.read(1)[0]
            handle.seek(9 * MiB + 5)
            handle.write(bytes([byte ^ 0xFF]))

    backend.after_upload = corrupt  # type: ignore[method-assign]
    result = probe.download(Workload(count=1, size="12MiB"))
    assert "(staged through a local file)" in str(result.strategy)
    assert f"differs from what was written at byte {9 * MiB + 5}" in result.errors[0].message
    assert os.listdir(tmp_path / "disk") == []


_RSS_SCRIPT = """
import json, sys
from storeprobe import Probe, Workload

def high_water_kib():  # VmHWM: this process image's peak RSS (ru_maxrss survives exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))

workload = Workload(count=1, size=sys.argv[2])
probe = Probe.from_url(sys.argv[1], streams=4, repeats=1, part_size="8MiB",
                       stage_above=sys.argv[3])
before = high_water_kib()
results = [probe.measure(op, workload) for op in ("upload", "download")]
print(json.dumps({"ok": [r.ok for r in results], "strategy": str(results[1].strategy),
                  "growth_kib": high_water_kib() - before}))
"""


def _peak_growth(tmp_path: Path, size: str, stage_above: str) -> dict[str, object]:
    disk = tmp_path / f"disk-{stage_above}"
    disk.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(disk), size, stage_above],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return dict(json.loads(out))


def test_staged_transfers_keep_memory_near_the_bytes_in_flight(tmp_path: Path) -> None:
    # a 384 MiB object in 8 MiB parts, 4 in flight (32 MiB): the staged probe's peak RSS
    # grows by at most 2 × 32 MiB + 64 MiB; held in memory it grows by most of the object
    staged = _peak_growth(tmp_path, "384MiB", "64MiB")
    held = _peak_growth(tmp_path, "384MiB", "1GiB")
    assert staged["ok"] == [True, True]
    assert held["ok"] == [True, True]
    assert "staged" in str(staged["strategy"])
    assert "staged" not in str(held["strategy"])
    assert int(str(staged["growth_kib"])) <= (2 * 32 + 64) * 1024
    assert int(str(held["growth_kib"])) >= 256 * 1024  # most of the object
    # the staging files (in the child's TMPDIR) are gone
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("storeprobe-")] == []
