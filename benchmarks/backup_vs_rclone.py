"""storeprobe's ``files`` backup method against ``rclone sync``: same tree, server and N.

The performance target of the backup issue: the ``files`` method moves a tree at least
as fast as ``rclone sync --transfers N`` on the same tree, server and N (N = 1 and 4).

Setup (untimed): ``rclone serve s3`` on 127.0.0.1 (tests/servers.py); a source tree
(``Tree.source_tree(size=--size)``, default 64 MiB) written to a local directory, every
file's mtime set to one fixed time a day back; its next version (``tree.evolve(seed=1)``)
made as a real evolving tree is: a copy of that directory (mtimes kept), the changed and
added files rewritten (mtime now), the deleted ones removed. So the second ``rclone sync``
finds unchanged files by size and mtime as it would on a real machine, and uploads only
the changed and added ones (checked once before the rounds with ``-v``, untimed).

Then ``--rounds`` rounds; each round, for each N, in alternating order:

- **rclone**: ``rclone sync EMPTY remote:bench/<fresh>`` (rclone's fixed cost: process
  start, config, an empty listing), ``rclone sync TREE remote:bench/<fresh> --transfers N
  --checkers N`` (the full backup), ``rclone sync TREE2`` over the same prefix (the
  incremental), each timed by the wall clock around the process; then ``rclone purge``.
  The S3 remote is configured through ``RCLONE_CONFIG_B_*`` environment variables
  (provider Other). rclone's time includes reading the local files and hashing them
  (MD5); "− start-up" subtracts that round's empty sync.
- **storeprobe**: ``Probe.from_url("s3://bench/storeprobe", streams=N).backup_restore(
  tree, versions=[tree, evolved], method="files")``: backup 1 (full), backup 2
  (incremental), then the two restores (not compared; every byte verified). Reported per
  backup step: the timed requests (``result.samples[0].seconds``: LISTs, HEADs, PUTs, the
  moves into the backup dir) and the step's wall time (measured around the
  scenario's backup step: it also
  holds storeprobe's own planning and the untimed walk of the target that reports the
  space used); and the wall time of the whole call (setup, two backups, two restores
  with verification, cleanup), for reference.

Prints one row per N with medians over the rounds, and two ratios per step:
(rclone − start-up) ÷ storeprobe timed (the requests against the requests and the
per-file work) and rclone raw ÷ storeprobe step wall (everything each tool does for the
step). Above 1, storeprobe is faster. ``--json`` writes every round's figures.

    python benchmarks/backup_vs_rclone.py [--size 64MiB] [--rounds 3] [--streams 1 4]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Result
from storeprobe.backup import scenario as scenario_module
from storeprobe.dataset import Tree
from tests.conftest import s3_options
from tests.servers import S3_KEY, S3_SECRET, Server, rclone_s3

BUCKET = "bench"
REMOTE = "B"  # the rclone remote's name, configured from the environment
OLD_MTIME = time.time() - 86_400  # version 0's files: written a day ago


# -- the trees on disk -------------------------------------------------------------------
def write_file(tree: Tree, file: Any, root: Path, mtime: float) -> None:
    path = root / file.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tree.payload(file))
    os.utime(path, (mtime, mtime))


def write_tree(tree: Tree, root: Path) -> None:
    """Every file of ``tree`` under ``root``, all with the same old mtime."""
    for file in tree.files:
        write_file(tree, file, root, OLD_MTIME)


def write_evolved(previous: Path, evolved: Tree, old: Tree, root: Path) -> None:
    """``evolved`` under ``root`` as an edited copy of ``previous`` (``old`` on disk)."""
    shutil.copytree(previous, root, copy_function=shutil.copy2)
    changes = evolved.diff(old)
    now = time.time()
    for file in changes.deleted:
        (root / file.path).unlink()
    for file in (*changes.changed, *changes.added):
        write_file(evolved, file, root, now)


def check_on_disk(tree: Tree, root: Path) -> None:
    """Raise unless ``root`` holds ``tree``'s paths and sizes (content is written from it)."""
    found = Tree.from_directory(root)
    if {(f.path, f.size) for f in found.files} != {(f.path, f.size) for f in tree.files}:
        raise RuntimeError(f"{root} does not hold {tree.describe()}")


def stored_files(server: Server, prefix: str) -> int:
    """Files the server holds under ``bench/<prefix>`` (read on its disk, untimed)."""
    assert server.root is not None
    return sum(1 for p in (server.root / BUCKET / prefix).rglob("*") if p.is_file())


# -- rclone ------------------------------------------------------------------------------
class Rclone:
    def __init__(self, endpoint: str) -> None:
        self.binary = shutil.which("rclone") or str(Path(sys.executable).parent / "rclone")
        name = f"RCLONE_CONFIG_{REMOTE}_"
        self.env = {  # never printed: it holds the keys
            **os.environ,
            "RCLONE_CONFIG": "/dev/null",
            name + "TYPE": "s3",
            name + "PROVIDER": "Other",
            name + "ENDPOINT": endpoint,
            name + "REGION": "us-east-1",
            name + "ACCESS_KEY_ID": S3_KEY,
            name + "SECRET_ACCESS_KEY": S3_SECRET,
        }

    def remote(self, prefix: str) -> str:
        return f"{REMOTE}:{BUCKET}/{prefix}"

    def run(self, *args: str) -> tuple[float, str]:
        """Run rclone; (wall seconds, stderr). Raises on failure."""
        argv = [self.binary, *args]
        start = time.perf_counter()
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(
                f"rclone {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}"
            )
        return seconds, done.stderr

    def sync(self, source: Path, prefix: str, streams: int, *extra: str) -> float:
        seconds, _ = self.sync_logged(source, prefix, streams, *extra)
        return seconds

    def sync_logged(
        self, source: Path, prefix: str, streams: int, *extra: str
    ) -> tuple[float, str]:
        return self.run(
            "sync",
            str(source),
            self.remote(prefix),
            f"--transfers={streams}",
            f"--checkers={streams}",
            *extra,
        )

    def purge(self, prefix: str) -> None:
        subprocess.run(
            [self.binary, "purge", self.remote(prefix)],
            env=self.env,
            capture_output=True,
            check=False,
        )


def rclone_round(
    rclone: Rclone, server: Server, dirs: dict[str, Path], trees: list[Tree], streams: int
) -> dict[str, float]:
    empty, full = f"rclone-empty-{uuid.uuid4().hex}", f"rclone-{uuid.uuid4().hex}"
    try:
        startup = rclone.sync(dirs["empty"], empty, streams)
        first = rclone.sync(dirs["v0"], full, streams)
        if stored_files(server, full) != len(trees[0].files):
            raise RuntimeError("rclone's full sync did not store every file")
        second = rclone.sync(dirs["v1"], full, streams)
        if stored_files(server, full) != len(trees[1].files):
            raise RuntimeError("rclone's incremental sync left the wrong file count")
    finally:
        rclone.purge(full)
        rclone.purge(empty)
    return {"startup": startup, "full": first, "incremental": second}


def rclone_check(rclone: Rclone, dirs: dict[str, Path]) -> dict[str, int]:
    """Untimed: what the incremental sync transfers (-v), to confirm it is incremental."""
    prefix = f"rclone-check-{uuid.uuid4().hex}"
    try:
        rclone.sync(dirs["v0"], prefix, 4)
        _, log = rclone.sync_logged(dirs["v1"], prefix, 4, "-v")
    finally:
        rclone.purge(prefix)
    return {
        "copied": sum("Copied (" in line for line in log.splitlines()),
        "deleted": sum(": Deleted" in line for line in log.splitlines()),
        "modtime updated": sum("Updated modification time" in line for line in log.splitlines()),
    }


# -- storeprobe --------------------------------------------------------------------------
@contextmanager
def backup_step_walls() -> Iterator[list[float]]:
    """Wall seconds of each backup step of the scenario (wrapping the step runner)."""
    walls: list[float] = []
    original = scenario_module._Scenario.run

    def timed(
        self: scenario_module._Scenario, step: scenario_module._Plan, directory: Path
    ) -> Result:
        start = time.perf_counter()
        try:
            return original(self, step, directory)
        finally:
            if step.kind == "backup":
                walls.append(time.perf_counter() - start)

    scenario_module._Scenario.run = timed  # type: ignore[method-assign]
    try:
        yield walls
    finally:
        scenario_module._Scenario.run = original  # type: ignore[method-assign]


def storeprobe_round(options: dict[str, Any], trees: list[Tree], streams: int) -> dict[str, float]:
    probe = Probe.from_url(f"s3://{BUCKET}/storeprobe", options, streams=streams)
    with backup_step_walls() as walls:
        start = time.perf_counter()
        results = probe.backup_restore(trees[0], versions=trees, method="files")
        call = time.perf_counter() - start
    failed = [r for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"storeprobe step failed: {[n.message for n in failed[0].errors]}")
    backups = [r for r in results if r.step is not None and r.step.kind == "backup"]
    full, incremental = backups
    assert full.step is not None
    assert incremental.step is not None
    puts = full.samples[0].requests_by_kind.get("put", 0)
    if full.step.moved_bytes < trees[0].total_bytes or puts != len(trees[0].files) + 1:
        raise RuntimeError("storeprobe's full backup did not upload every file and a manifest")
    return {
        "full": full.samples[0].seconds,
        "full wall": walls[0],
        "incremental": incremental.samples[0].seconds,
        "incremental wall": walls[1],
        "call wall": call,
        "incremental moved": incremental.step.moved_bytes,
        "incremental puts": incremental.samples[0].requests_by_kind.get("put", 0),
    }


# -- the table ---------------------------------------------------------------------------
def median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def summary(rclone: list[dict[str, float]], sp: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {"rclone start-up": median(rclone, "startup")}
    for step in ("full", "incremental"):
        net = statistics.median(r[step] - r["startup"] for r in rclone)
        raw = median(rclone, step)
        timed, wall = median(sp, step), median(sp, f"{step} wall")
        out |= {
            f"rclone {step}": raw,
            f"rclone {step} - start-up": net,
            f"storeprobe {step} timed": timed,
            f"storeprobe {step} wall": wall,
            f"{step} ratio net/timed": net / timed,
            f"{step} ratio raw/wall": raw / wall,
        }
    out["storeprobe call wall"] = median(sp, "call wall")
    return out


def print_table(rows: dict[int, dict[str, float]]) -> None:
    print(
        "| N | step | rclone raw s | rclone − start-up s | storeprobe timed s "
        "| storeprobe step wall s | rclone−start-up ÷ sp timed | rclone raw ÷ sp wall |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for streams, row in rows.items():
        for step in ("full", "incremental"):
            print(
                f"| {streams} | {step} | {row[f'rclone {step}']:.3f} "
                f"| {row[f'rclone {step} - start-up']:.3f} "
                f"| {row[f'storeprobe {step} timed']:.3f} | {row[f'storeprobe {step} wall']:.3f} "
                f"| {row[f'{step} ratio net/timed']:.2f}× | {row[f'{step} ratio raw/wall']:.2f}× |"
            )
    print()
    for streams, row in rows.items():
        print(
            f"N={streams}: rclone start-up (empty sync) {row['rclone start-up']:.3f} s; "
            f"storeprobe whole call (2 backups + 2 verified restores + setup/cleanup) "
            f"{row['storeprobe call wall']:.3f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="64MiB", help="source tree size (default 64MiB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    tree = Tree.source_tree(size=args.size)
    evolved = tree.evolve(seed=1)
    trees = [tree, evolved]
    changes = evolved.diff(tree)
    print(
        f"{tree.describe()}; {evolved.describe()}: {changes.describe()}",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="backup-vs-rclone-") as work_name:
        work = Path(work_name)
        dirs = {"empty": work / "empty", "v0": work / "v0", "v1": work / "v1"}
        dirs["empty"].mkdir()
        write_tree(tree, dirs["v0"])
        write_evolved(dirs["v0"], evolved, tree, dirs["v1"])
        check_on_disk(tree, dirs["v0"])
        check_on_disk(evolved, dirs["v1"])
        with rclone_s3(work / "s3root") as server:
            rclone = Rclone(server.endpoint)
            options = s3_options(server.endpoint)
            check = rclone_check(rclone, dirs)
            print(
                f"rclone incremental sync (untimed check, -v): {check}; storeprobe uploads "
                f"{len(changes.changed) + len(changes.added)} files",
                file=sys.stderr,
                flush=True,
            )
            figures: dict[int, dict[str, list[dict[str, float]]]] = {
                n: {"rclone": [], "storeprobe": []} for n in args.streams
            }
            for round_ in range(args.rounds):
                for index, streams in enumerate(args.streams):
                    runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
                        (
                            "rclone",
                            functools.partial(rclone_round, rclone, server, dirs, trees, streams),
                        ),
                        (
                            "storeprobe",
                            functools.partial(storeprobe_round, options, trees, streams),
                        ),
                    ]
                    if (round_ + index) % 2:
                        runs.reverse()
                    for name, run in runs:
                        figures[streams][name].append(got := run())
                        shown = ", ".join(
                            f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                            for k, v in got.items()
                        )
                        print(
                            f"  round {round_ + 1} N={streams} {name}: {shown}",
                            file=sys.stderr,
                            flush=True,
                        )
            left = sum(1 for p in (work / "s3root" / BUCKET).rglob("*") if p.is_file())
    rows = {n: summary(f["rclone"], f["storeprobe"]) for n, f in figures.items()}
    print(
        f"\n{tree.describe()}; incremental to {evolved.describe()} ({changes.describe()}); "
        f"medians of {args.rounds} rounds; ratios above 1: storeprobe faster\n"
    )
    print_table(rows)
    print(f"objects left on the server after cleanup: {left}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "tree": tree.describe(),
                    "evolved": evolved.describe(),
                    "rclone incremental check": check,
                    "rounds": {str(n): f for n, f in figures.items()},
                    "summary": {str(n): row for n, row in rows.items()},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
