"""Peak RSS of a backup scenario with and without the heap trimmed after each large window.

Each case runs ``Probe.backup_restore`` of ``Tree.source_tree(scale=S)`` (six versions,
every version backed up, then each restored and verified) on the local disk in a process
of its own, and reports its wall time (s) and peak RSS (``VmHWM``, MiB) with the trim
(storeprobe as shipped: :func:`storeprobe.heap.release` after each window that moved
≥ 8 MiB) and without it (the process's ``heap._malloc_trim`` made to find nothing), at
each stream count, and the ratio trimmed ÷ untrimmed of the peak. With more than one
stream the requests run on worker threads, whose glibc arenas keep the memory the
scenario freed: the untrimmed peak grows with the streams, the trimmed one should not.

    python benchmarks/heap_trim.py [--scale 0.25] [--streams 1 4] [--methods files chunks]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = """
import json, sys, tempfile, time
sys.path.insert(0, {root!r})
from storeprobe import Probe, Tree, heap

if not {trim!r}:
    heap._malloc_trim = lambda: None

def rss_mib(field):
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith(field)) / 1024

first = Tree.source_tree(scale={scale!r}, seed=1)
base = rss_mib("VmRSS")
start = time.perf_counter()
with tempfile.TemporaryDirectory() as root:
    results = Probe.from_url(root, streams={streams!r}).backup_restore(
        first, versions=6, method={method!r})
print(json.dumps({{
    "ok": all(r.ok for r in results),
    "files": len(first.files),
    "wall_s": time.perf_counter() - start,
    "base_mib": base,
    "peak_mib": rss_mib("VmHWM"),
}}))
"""


def _case(scale: float, streams: int, method: str, trim: bool) -> dict[str, object]:
    code = CASE.format(root=str(ROOT), scale=scale, streams=streams, method=method, trim=trim)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.25)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--methods", nargs="+", default=["files"])
    args = parser.parse_args()
    print("| method | streams | files | wall untrimmed (s) | wall trimmed (s) "
          "| peak untrimmed (MiB) | peak trimmed (MiB) | trimmed ÷ untrimmed |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for method in args.methods:
        for streams in args.streams:
            off = _case(args.scale, streams, method, trim=False)
            on = _case(args.scale, streams, method, trim=True)
            if not (off["ok"] and on["ok"]):
                raise SystemExit(f"a scenario failed: {off} {on}")
            peak_off, peak_on = float(str(off["peak_mib"])), float(str(on["peak_mib"]))
            print(
                f"| {method} | {streams} | {on['files']} | {float(str(off['wall_s'])):.1f} "
                f"| {float(str(on['wall_s'])):.1f} | {peak_off:.0f} | {peak_on:.0f} "
                f"| {peak_on / peak_off:.3f} |"
            )


if __name__ == "__main__":
    main()
