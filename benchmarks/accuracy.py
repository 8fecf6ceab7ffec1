"""storeprobe's error on links of known speed: 8, 40 and 200 Mbit/s.

For each rate, a network namespace's loopback is shaped with tbf; ``rclone serve s3``,
a raw TCP transfer (the reference: the payload rate the link really carries) and
storeprobe all run inside it. Prints the best-of-N raw rate, storeprobe's best-of-N
large upload and download, and their error against the reference. Needs root.

    python benchmarks/accuracy.py [--rates 8 40 200] [--seconds 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Result
from tests.shaped_link import shaped_link

MiB = 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[8, 40, 200])
    parser.add_argument("--seconds", type=float, default=4.0, help="target length of one transfer")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for mbit in args.rates:
        size = max(MiB, int(mbit * 1e6 / 8 * args.seconds) // MiB * MiB)
        with (
            tempfile.TemporaryDirectory() as work,
            shaped_link(mbit) as link,
            link.rclone_s3(Path(work)) as endpoint,
        ):
            raw = max(link.raw_tcp_rate(size) for _ in range(args.repeats))
            figures = {}
            for operation in ("upload", "download"):
                result = Result.from_dict(link.probe(endpoint, size, operation, args.repeats))
                figures[operation] = result.bytes_per_s
                cpu = [s.cpu_fraction for s in result.samples]
                print(
                    f"  {mbit:g} Mbit/s {operation}: client CPU {cpu}, warnings {result.warnings}",
                    file=sys.stderr,
                    flush=True,
                )
        row = (mbit, size // MiB, raw, figures["upload"], figures["download"])
        rows.append(row)
        print(f"  {mbit:g} Mbit/s done", file=sys.stderr, flush=True)
    print("| tbf rate | object | raw TCP payload | upload | error | download | error |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for mbit, size_mib, raw, up, down in rows:
        print(
            f"| {mbit:g} Mbit/s | {size_mib} MiB | {raw * 8 / 1e6:.2f} Mbit/s "
            f"| {up * 8 / 1e6:.2f} Mbit/s | {100 * (up / raw - 1):+.2f} % "
            f"| {down * 8 / 1e6:.2f} Mbit/s | {100 * (down / raw - 1):+.2f} % |"
        )


if __name__ == "__main__":
    main()
