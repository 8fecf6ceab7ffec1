"""Memory: peak RSS of one large object's probe, and what staging costs in throughput.

Two parts, both against a local disk and S3 (``rclone serve s3`` on 127.0.0.1, started
here as the tests start it; obstore, storeprobe's default client, and s3fs):

- **peak RSS** (default): one object of ``--size`` (4 GiB), upload and download at 1 and
  8 streams, each case in its own process, one repeat, the object staged (see
  ``storeprobe.staging``). Peak RSS is the process's ``VmHWM`` (its high-water mark,
  imports, the untimed setup upload and verification included). The allowance is
  256 MiB plus the parts in flight: the most bytes the layout has in flight (its
  streams × its part size for a split object, one ``staging.CHUNK`` for a single
  request that streams through the staged file), the download's setup upload included.
- **staging's cost** (``--ratio``): at a size the probe used to hold in memory
  (``--ratio-size``, 256 MiB), the staged path (``stage_above`` at the size) against the
  in-memory path (``stage_above`` above it), in alternating rounds in one process, the
  median of each; the ratio is staged ÷ in memory (above 1: staging is faster).

    python benchmarks/memory.py [--size 4GiB] [--targets local obstore s3fs] [--json FILE]
    python benchmarks/memory.py --ratio [--rounds 5] [--ratio-size 256MiB] [--streams 1 8]

Staging files go to ``TMPDIR``; the script checks that it and the work directory have
room for the object twice (staged copy and stored object) and deletes everything after.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import s3_options
from tests.servers import rclone_s3

ROOT = Path(__file__).resolve().parent.parent
ALLOWANCE_MIB = 256
CASE = """
import json, sys, tempfile
sys.path.insert(0, {root!r})
from storeprobe import Probe, Workload
from storeprobe.planning import choose
from storeprobe.staging import CHUNK
def high_water_mib():  # VmHWM: this process image's peak RSS (ru_maxrss survives exec)
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM")) / 1024
workload = Workload(count=1, size={size})
url, options = {url!r}, {options!r}
with tempfile.TemporaryDirectory(dir={work!r}) as directory:
    probe = Probe.from_url(url or directory, options, streams={streams}, repeats=1,
                           stage_above={stage_above}, **{keywords!r})
    backend = probe.target.backend
    in_flight = 0
    for operation in ("upload", {operation!r}):
        layout = choose(backend.capabilities, backend.client, operation, workload, {streams},
                        part_size=probe.part_size, stage_above=probe.stage_above)
        if layout.split:
            in_flight = max(in_flight, layout.effective_streams * layout.part_size)
        else:
            in_flight = max(in_flight, CHUNK if layout.staged else workload.size)
    baseline = high_water_mib()
    result = probe.measure({operation!r}, workload)
print(json.dumps({{
    "ok": result.ok,
    "errors": [str(error) for error in result.errors],
    "strategy": str(result.strategy),
    "client": result.backend,
    "mib_per_s": result.mib_per_s if result.samples else None,
    "baseline_rss_mib": baseline,
    "peak_rss_mib": high_water_mib(),
    "in_flight_mib": in_flight / 1024**2,
}}))
"""


def parse_size(text: str) -> int:
    from storeprobe.units import parse_size as parse

    return parse(text)


def peak(
    url: str,
    options: dict[str, Any],
    keywords: dict[str, Any],
    size: int,
    operation: str,
    streams: int,
    work: str,
) -> dict[str, Any]:
    """One case in its own process: its figures and peak RSS."""
    code = CASE.format(
        root=str(ROOT),
        url=url,
        options=options,
        keywords=keywords,
        size=size,
        operation=operation,
        streams=streams,
        stage_above=min(size, 1 << 30),
        work=work,
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{operation} at {streams} streams failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not figures["ok"]:
        raise RuntimeError(f"{operation} at {streams} streams on {url or 'local'}: {figures}")
    return figures


def check_room(size: int, *directories: str) -> None:
    for directory in directories:
        free = shutil.disk_usage(directory).free
        if free < 2 * size + (1 << 30):
            raise SystemExit(f"{directory} has {free / 2**30:.1f} GiB free: not enough")


def ratios(
    targets: list[tuple[str, str, dict[str, Any], dict[str, Any]]],
    size: int,
    rounds: int,
    work: str,
    stream_counts: tuple[int, ...] = (1, 8),
) -> list[dict[str, Any]]:
    """Staged against in memory at ``size``, alternating rounds in this process."""
    from storeprobe import Probe, Workload

    workload = Workload(count=1, size=size)
    rows = []
    for name, url, options, keywords in targets:
        with tempfile.TemporaryDirectory(dir=work) as directory:
            for operation in ("upload", "download"):
                for streams in stream_counts:
                    rates: dict[str, list[float]] = {"memory": [], "staged": []}
                    strategies = {}
                    for round_ in range(rounds):
                        order = ("memory", "staged") if round_ % 2 == 0 else ("staged", "memory")
                        for way in order:
                            stage_above = size if way == "staged" else 2 * size
                            probe = Probe.from_url(
                                url or directory,
                                options,
                                streams=streams,
                                repeats=1,
                                stage_above=stage_above,
                                **keywords,
                            )
                            result = probe.measure(operation, workload)
                            if not result.ok:
                                raise RuntimeError(f"{name} {operation}: {result.errors}")
                            rates[way].append(result.mib_per_s)
                            strategies[way] = str(result.strategy)
                    memory = statistics.median(rates["memory"])
                    staged = statistics.median(rates["staged"])
                    row = {
                        "target": name,
                        "operation": operation,
                        "streams": streams,
                        "memory_mib_per_s": memory,
                        "staged_mib_per_s": staged,
                        "ratio": staged / memory,
                        "rounds": rounds,
                        "strategies": strategies,
                        "rates": rates,
                    }
                    print(
                        f"| {name} | {operation} | {streams} | {memory:.0f} | {staged:.0f} "
                        f"| {staged / memory:.2f}× |",
                        flush=True,
                    )
                    rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4GiB", help="object size for peak RSS (4GiB)")
    parser.add_argument("--ratio", action="store_true", help="staging's throughput cost")
    parser.add_argument("--ratio-size", default="256MiB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8], help="for --ratio")
    parser.add_argument(
        "--targets", nargs="+", default=["local", "obstore", "s3fs"], help="local obstore s3fs"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    size = parse_size(args.ratio_size if args.ratio else args.size)
    work = tempfile.mkdtemp(prefix="storeprobe-memory-", dir="/var/tmp")
    rows: list[dict[str, Any]] = []
    try:
        check_room(size, work, tempfile.gettempdir())
        with rclone_s3(Path(work) / "s3root") as server:
            s3 = s3_options(server.endpoint)
            targets = [
                ("local", "", {}, {}),
                ("S3 (obstore)", "s3://bench/memory", s3, {"client": "obstore"}),
                ("S3 (s3fs)", "s3://bench/memory", s3, {"client": "s3fs"}),
            ]
            targets = [t for t in targets if t[3].get("client", "local") in args.targets]
            if args.ratio:
                print("| target | operation | streams | in memory MiB/s | staged MiB/s | ratio |")
                print("|---|---|---:|---:|---:|---:|")
                rows = ratios(targets, size, args.rounds, work, tuple(args.streams))
            else:
                print(
                    "| target | operation | streams | MiB/s | in flight (MiB) "
                    "| allowance (MiB) | peak RSS (MiB) | within |"
                )
                print("|---|---|---:|---:|---:|---:|---:|---|")
                for name, url, options, keywords in targets:
                    for operation in ("upload", "download"):
                        for streams in (1, 8):
                            f = peak(url, options, keywords, size, operation, streams, work)
                            allowance = ALLOWANCE_MIB + f["in_flight_mib"]
                            within = f["peak_rss_mib"] <= allowance
                            rows.append(
                                {
                                    "target": name,
                                    "operation": operation,
                                    "streams": streams,
                                    "allowance_mib": allowance,
                                    "within": within,
                                    **f,
                                }
                            )
                            print(
                                f"| {name} | {operation} | {streams} | {f['mib_per_s']:.0f} "
                                f"| {f['in_flight_mib']:.0f} | {allowance:.0f} "
                                f"| {f['peak_rss_mib']:.0f} | {'yes' if within else 'NO'} |",
                                flush=True,
                            )
                            print(f"  {f['strategy']}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
