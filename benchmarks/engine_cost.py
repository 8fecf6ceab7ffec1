"""The engine's own cost per request, this checkout against another, alternating.

Runs ``benchmarks/overhead.py``'s :func:`engine_cost_ns` (20 000 jobs that do nothing,
run bare and through the engine, best of 5) in a fresh interpreter for each checkout,
``--rounds`` times in alternating order, and prints the median of each in ns per request
for the async and sync engines at 1 and 8 streams. ``--before`` is a checkout of the
version to compare with (e.g. ``git worktree add /tmp/before 8b2c8af``).

On a 2-core machine the sync engine at 8 threads is dominated by GIL hand-offs between
the threads, in the bare loop as much as in the engine: that row swings from run to run
(a 2-round run here gave -1297 ns, the bare loop being the slower), so read it from
many rounds or not at all.

    python benchmarks/engine_cost.py --before /tmp/before [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CODE = r"""
import json, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/benchmarks"]
import overhead
print(json.dumps({
    f"{'async' if is_async else 'sync'} {streams}": overhead.engine_cost_ns(is_async, streams)
    for is_async in (True, False) for streams in (1, 8)
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    checkouts = {"before": args.before.resolve(), "after": here}
    costs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for number in range(args.rounds):
        order = list(checkouts) if number % 2 == 0 else list(reversed(checkouts))
        for name in order:
            root = checkouts[name]
            done = subprocess.run(
                [sys.executable, "-c", CODE, str(root)],
                capture_output=True,
                text=True,
                cwd=root,
                check=True,
            )
            costs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| engine, streams | before (ns) | after (ns) | after ÷ before |")
    print("|---|---:|---:|---:|")
    for key in costs["before"][0]:
        before = statistics.median(run[key] for run in costs["before"])
        after = statistics.median(run[key] for run in costs["after"])
        print(f"| {key} | {before:.0f} | {after:.0f} | {after / before:.2f} |")


if __name__ == "__main__":
    main()
