"""Memory of backup scenarios: peak RSS of a backup and restore, per method, on the local disk.

Each case runs ``storeprobe backup`` (every step: each version backed up, then each
restored and verified) in a process of its own, on a fresh directory under the work
directory, and reports that process's ``VmHWM`` (its peak resident set, in MiB) beside
the baseline: the peak RSS of a Python process that has only imported storeprobe, taken
in the same run. Growth is peak − baseline; the goal (issue 24) is about 256 MiB plus what
is in flight, whatever the dataset's size.

    python benchmarks/backup_memory.py [--root DIR] [--methods files restic ...]
        [--cases image:1GiB:2 tree:256MiB:2] [--json FILE]

``--root`` is the checkout whose storeprobe is measured (default: this one), so one run
can compare two branches with the same script.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("files", "chunks", "restic", "duplicity", "duplicacy", "rsnapshot", "rdiff-backup")
HWM = """
def high_water_mib():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM")) / 1024
"""
BASELINE = (
    "import sys; sys.path.insert(0, {root!r})\nimport storeprobe, storeprobe.cli\n"
    + HWM
    + ("print(high_water_mib())")
)
CASE = (
    "import sys, contextlib, io; sys.path.insert(0, {root!r})\n"
    "from storeprobe.cli import main\n"
    + HWM
    + "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
    "    code = main({argv!r})\n"
    "print(code, high_water_mib())\n"
)


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"case failed:\n{done.stderr[-2000:]}")
    return done.stdout.split("\n")[-2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(ROOT))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--cases", nargs="+", default=["image:1GiB:2", "tree:256MiB:2"])
    parser.add_argument("--work", default=str(ROOT))
    parser.add_argument("--json")
    args = parser.parse_args()
    root = str(Path(args.root).resolve())
    baseline = float(_run(BASELINE.format(root=root)))
    print(f"baseline (storeprobe imported): {baseline:.0f} MiB", flush=True)
    print("| dataset | method | peak RSS MiB | growth MiB |")
    print("|---|---|---:|---:|", flush=True)
    rows = []
    for case in args.cases:
        kind, size, versions = case.split(":")
        for method in args.methods:
            with tempfile.TemporaryDirectory(dir=args.work) as directory:
                argv = [
                    "backup", directory, "--dataset", kind, "--size", size,
                    "--versions", versions, "--method", method, "--seed", "1",
                ]  # fmt: skip
                code, peak = _run(CASE.format(root=root, argv=argv)).split()
            row = {
                "dataset": f"{kind} {size} × {versions}",
                "method": method,
                "exit": int(code),
                "peak_mib": round(float(peak)),
                "growth_mib": round(float(peak) - baseline),
            }
            rows.append(row)
            flag = "" if row["exit"] == 0 else f" (exit {code})"
            print(
                f"| {row['dataset']} | {method}{flag} | {row['peak_mib']} | {row['growth_mib']} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"baseline_mib": baseline, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
