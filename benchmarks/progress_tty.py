"""Does drawing progress change the figure? ``storeprobe run`` on a terminal and piped.

The first release redrew its progress line once per object from inside the timed window:
on a terminal, 256 × 16 KiB on the local disk read 243 000 KiB/s against 341 000 piped.
Progress is now drawn by a separate thread at most 10 times a second, and the window
only adds integers. This benchmark runs the same small local probes through the command
line, alternately on a pseudo-terminal (stdout and stderr a pty: the progress bar is on,
as a user at a terminal sees it) and piped (no bar), for ``--rounds`` rounds, and
compares the two with ``storeprobe.stats.compare`` (bootstrap ratio of medians over
every repeat of every round, 95 % interval).

    python benchmarks/progress_tty.py [--rounds 8] [--streams 4] [--workload 256x16KiB]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from storeprobe import load_results
from storeprobe.stats import compare


def _run(mode: str, directory: Path, out: Path, args: argparse.Namespace) -> str:
    command = [
        sys.executable,
        "-m",
        "storeprobe",
        "run",
        str(directory),
        "--workload",
        args.workload,
        "--streams",
        str(args.streams),
        "--repeats",
        str(args.repeats),
        "--json",
        str(out),
    ]
    if mode == "terminal":
        controller, terminal = pty.openpty()
        process = subprocess.Popen(command, stdout=terminal, stderr=terminal, stdin=terminal)
        os.close(terminal)
        drawn = bytearray()
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        os.close(controller)
        if process.wait() != 0:
            raise RuntimeError(
                f"storeprobe failed on the terminal:\n{drawn.decode(errors='replace')}"
            )
        return drawn.decode(errors="replace")
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"storeprobe failed piped:\n{completed.stderr}")
    return completed.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workload", default="256x16KiB")
    parser.add_argument("--json", type=Path, help="also write every rate as JSON")
    args = parser.parse_args()

    rates: dict[tuple[str, str], list[float]] = {}
    bars = 0
    with tempfile.TemporaryDirectory(dir=os.environ.get("STOREPROBE_BENCH_DIR", "/var/tmp")) as tmp:
        root = Path(tmp)
        target = root / "target"
        target.mkdir()
        for number in range(args.rounds):
            order = ("terminal", "piped") if number % 2 == 0 else ("piped", "terminal")
            for mode in order:
                out = root / f"{mode}-{number}.json"
                text = _run(mode, target, out, args)
                if mode == "terminal":
                    bars += text.count("\r")
                for result in load_results(out):
                    rates.setdefault((mode, result.operation), []).extend(
                        sample.bytes_per_s for sample in result.samples
                    )
    print(
        f"storeprobe run, {args.workload}, {args.streams} streams, {args.repeats} repeats, "
        f"{args.rounds} rounds each way (alternating order); local disk"
    )
    print(f"progress redraws seen on the terminal: {bars}")
    print()
    print(
        "| operation | terminal median (KiB/s) | piped median (KiB/s) | ratio "
        "| 95 % interval | verdict |"
    )
    print("|---|---:|---:|---:|---|---|")
    for operation in ("upload", "download"):
        on_tty = np.array(rates[("terminal", operation)])
        piped = np.array(rates[("piped", operation)])
        found = compare(on_tty, piped)
        print(
            f"| {operation} | {np.median(on_tty) / 1024:.0f} | {np.median(piped) / 1024:.0f} | "
            f"{found.ratio:.3f} | {found.low:.3f}–{found.high:.3f} | {found.verdict} |"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({f"{mode} {op}": values for (mode, op), values in rates.items()}, indent=1)
        )


if __name__ == "__main__":
    main()
