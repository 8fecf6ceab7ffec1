"""Memory of backup scenarios: peak RSS of a backup and restore, per method, on the local disk.

Each case runs ``storeprobe backup`` (every step: each version backed up, then each
restored and verified) in a process of its own, on a fresh directory under the work
directory, and reports that process's ``VmHWM`` (its peak resident set, in MiB) beside
the baseline: the peak RSS of a Python process that has only imported storeprobe, taken
in the same run. Growth is peak − baseline; the goal (issue 24) is about 256 MiB plus what
is in flight, whatever the dataset's size.

    python benchmarks/backup_memory.py [--root DIR] [--methods files restic ...]
        [--cases image:1GiB:2 tree:256MiB:2] [--json FILE]
    python benchmarks/backup_memory.py --steps [--fraction 1.0] [--pattern clustered]
        [--pack-size 16MiB] [--methods restic rdiff-backup] [--cases image:256MiB:3]

``--steps`` runs each case through ``Probe.backup_restore`` instead of the CLI and
reports the peak of the backups and the peak of the restores apart: ``VmHWM`` is reset
(``/proc/self/clear_refs``) as each step starts and read as the next starts, so a step's
peak is the most the process held during it (what earlier steps left included, every
restore's verification included). There ``--fraction`` and ``--pattern`` set how an
image evolves (``Image.evolve``: default 1 % of the blocks, spread; ``--fraction 1``
rewrites the image whole, the largest reverse deltas rdiff-backup can store) and
``--pack-size`` restic's pack size.

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


STEPS = (
    "import sys, json; sys.path.insert(0, {root!r})\n"
    "from storeprobe import Image, Probe, Tree\n"
    "from storeprobe.backup import METHODS\n"
    "from storeprobe.backup.restic import Restic\n"
    + HWM
    + """
kind, size, count = {kind!r}, {size!r}, {count!r}
if kind == "image":
    chain = [Image.create(size, seed=1)]
    for _ in range(count - 1):
        chain.append(chain[-1].evolve(fraction={fraction!r}, pattern={pattern!r}))
else:
    chain = [Tree.source_tree(size=size, seed=1)]
    for _ in range(count - 1):
        chain.append(chain[-1].evolve())
method = {method!r}
if method == "restic" and {pack_size!r}:
    method = Restic(pack_size={pack_size!r})
peaks = {{}}

class Peaks:  # a StepProgress: each step's VmHWM, reset as it starts
    label = None
    def _end(self):
        if self.label is not None:
            peaks[self.label] = high_water_mib()
    def start(self, description):
        self._end()
        self.label = description.split(" (")[0]
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    def close(self):
        self._end()
        self.label = None
    def window(self, moved):
        pass
    def work(self, what, done):
        pass

progress = Peaks()
results = Probe.from_url({directory!r}, streams=1).backup_restore(
    chain[0], versions=chain, method=method, progress=progress)
progress.close()
print(json.dumps({{"ok": all(r.ok for r in results),
                  "errors": [str(e) for r in results for e in r.errors], "peaks": peaks}}))
"""
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
    parser.add_argument("--steps", action="store_true", help="peaks of backups and restores")
    parser.add_argument("--fraction", type=float, default=0.01, help="--steps: image evolve")
    parser.add_argument("--pattern", default="spread", choices=["spread", "clustered"])
    parser.add_argument("--pack-size", default=None, help="--steps: restic's pack size")
    args = parser.parse_args()
    root = str(Path(args.root).resolve())
    baseline = float(_run(BASELINE.format(root=root)))
    print(f"baseline (storeprobe imported): {baseline:.0f} MiB", flush=True)
    if args.steps:
        _steps(args, root, baseline)
        return
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


def _steps(args: argparse.Namespace, root: str, baseline: float) -> None:
    """Each case through the API: the peak of its backups and of its restores, apart."""
    print(f"image evolve: fraction {args.fraction}, {args.pattern}; pack size {args.pack_size}")
    print("| dataset | method | backups: peak RSS MiB | restores: peak RSS MiB | growth MiB |")
    print("|---|---|---:|---:|---:|", flush=True)
    rows = []
    for case in args.cases:
        kind, size, versions = case.split(":")
        for method in args.methods:
            with tempfile.TemporaryDirectory(dir=args.work) as directory:
                code = STEPS.format(
                    root=root, kind=kind, size=size, count=int(versions), method=method,
                    fraction=args.fraction, pattern=args.pattern, pack_size=args.pack_size,
                    directory=directory,
                )  # fmt: skip
                done = json.loads(_run(code))
            if not done["ok"]:
                raise SystemExit(f"{case} {method} failed: {done['errors']}")
            peaks = done["peaks"]
            backups = max(v for k, v in peaks.items() if k.startswith("backup"))
            restores = max(v for k, v in peaks.items() if k.startswith("restore"))
            row = {
                "dataset": f"{kind} {size} × {versions}",
                "method": method,
                "backup_peak_mib": round(backups),
                "restore_peak_mib": round(restores),
                "growth_mib": round(max(backups, restores) - baseline),
                "steps": {k: round(v) for k, v in peaks.items()},
            }
            rows.append(row)
            print(
                f"| {row['dataset']} | {method} | {row['backup_peak_mib']} | "
                f"{row['restore_peak_mib']} | {row['growth_mib']} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"baseline_mib": baseline, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
