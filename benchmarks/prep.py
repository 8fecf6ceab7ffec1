"""Wall time against timed time: what the untimed work around the windows costs.

A probe's figure comes from its timed windows; the user waits for the whole call. Around
the windows run the objects a download reads (uploaded first), their size checks, the
deletes and the cleanup. This benchmark runs ``upload`` and ``download`` of 256 × 16 KiB
at 1 stream, 3 repeats, on ``rclone serve s3`` on 127.0.0.1 behind a proxy that delays
every byte by 10 ms each way (``tests/delay_proxy.py``: a 20 ms round trip), twice per
operation: with ``prep_streams=1`` (the untimed work one request at a time, as before
``prep_streams`` existed) and with the default (32). It prints, for each, the wall time
of the probe call, the timed time (the sum of its windows) and wall ÷ timed. The two
settings alternate within one run, on the same server and proxy, so their ratios are
comparable; absolute seconds are this machine's.

    python benchmarks/prep.py [--delay-ms 10] [--client obstore|s3fs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Workload
from storeprobe.settings import DEFAULT_PREP_STREAMS
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.servers import rclone_s3

WORKLOAD = Workload.small()  # 256 × 16 KiB


def one(endpoint: str, client: str, operation: str, prep_streams: int) -> dict[str, Any]:
    """One probe call: its wall time and the sum of its windows, in seconds."""
    probe = Probe.from_url(
        "s3://bench/prep",
        s3_options(endpoint),
        client=client,
        streams=1,
        repeats=3,
        prep_streams=prep_streams,
    )
    start = time.perf_counter_ns()
    result = probe.measure(operation, WORKLOAD)  # type: ignore[arg-type]
    wall = (time.perf_counter_ns() - start) / 1e9
    if not result.ok:
        raise SystemExit(f"{operation} with prep_streams={prep_streams} failed: {result.errors}")
    timed = sum(sample.elapsed_ns for sample in result.samples) / 1e9
    return {
        "operation": operation,
        "prep_streams": prep_streams,
        "client": result.backend,
        "wall_s": wall,
        "timed_s": timed,
        "ratio": wall / timed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=10.0, help="one-way delay")
    parser.add_argument("--client", default="obstore", choices=["obstore", "s3fs"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root, rclone_s3(Path(root)) as server:
        proxy = DelayProxy(server.port, delay_s=args.delay_ms / 1000).start()
        try:
            endpoint = f"http://127.0.0.1:{proxy.port}"
            for operation in ("upload", "download"):
                for prep_streams in (1, DEFAULT_PREP_STREAMS):
                    row = one(endpoint, args.client, operation, prep_streams)
                    rows.append(row)
                    print(
                        f"{operation:8} prep_streams={prep_streams:<3} wall {row['wall_s']:7.2f} s"
                        f"  timed {row['timed_s']:7.2f} s  wall ÷ timed {row['ratio']:.2f}",
                        file=sys.stderr,
                    )
        finally:
            proxy.stop()
    print(
        f"\n{WORKLOAD.describe()}, 1 stream, 3 repeats, rclone serve s3 behind "
        f"{args.delay_ms:g} ms each way, {rows[0]['client']}\n"
    )
    print("| operation | prep_streams | wall (s) | timed (s) | wall ÷ timed |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['operation']} | {row['prep_streams']} | {row['wall_s']:.2f} | "
            f"{row['timed_s']:.2f} | {row['ratio']:.2f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
