"""How long a user waits for an answer: wall time ÷ timed windows of each probe call.

Two parts, both timing phases from outside the library (``time.perf_counter`` around
storeprobe's own functions, wrapped for the run: :class:`Phases`; no library code changes):

1. **Behind round trips.** ``rclone serve s3`` on 127.0.0.1, reached directly (0 ms) or
   through ``tests/delay_proxy.py`` (10 ms and 50 ms each way: 20 and 100 ms of round
   trip). The four seed probes (upload and download, small and large) at 1 and 8 streams,
   3 repeats each (the default), by default at modest sizes so the run ends in minutes:
   small = 256 × 16 KiB (64 × 16 KiB from 100 ms on: ``--far-count``), large = 1 × 32 MiB
   (``--large``); ``--far-count 256 --large 256MiB`` measures the seed probes' own sizes.
   The server is reached through the test suite's folder gate (``tests.servers.rclone_s3``:
   rclone loses objects several PUTs write into a new folder at once). For each
   call: its wall time, its timed windows (the sum of the Result's samples), wall ÷
   windows, and for a download the time its objects took to upload, untimed, at the
   preparation concurrency (``prep_streams``, 32; every repeat uploads its own objects),
   measured inside the same call. The issue's goals: an upload's wall ≤ 1.25 × its
   windows; a download's ≤ 1.25 × (windows + those uploads).
2. **The default ``storeprobe run`` on the local disk** (a fresh temporary directory,
   small and large, 1 stream, 3 repeats): the CLI's wall time as a subprocess, the
   interpreter's start-up and the import of the CLI alone (each the best of 3), then the
   same probes in this process with every phase timed: where the time outside the windows
   goes (payload generation, fsync and page-cache eviction, verification, deletes, ...).

    python benchmarks/answer_time.py [--rtt-ms 0 20 100] [--streams 1 8] [--large 32MiB]
        [--far-count 64] [--workloads small large] [--client auto] [--skip-local]
        [--skip-remote] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import storeprobe.backends.local as local_backend
import storeprobe.measurement as measurement
import storeprobe.repeats as repeats
from storeprobe import Probe, Result, Workload
from storeprobe.measurement import Measurement
from storeprobe.units import parse_size
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.servers import rclone_s3

ROOT = Path(__file__).resolve().parent.parent
FAR_MS = 100.0
GOAL = 1.25


class Phases:
    """Seconds spent in each wrapped function, exclusive of the wrapped ones it calls."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attribute: str, name: str | Callable[..., str]) -> None:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            start = time.perf_counter()
            self._stack.append(0.0)
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inner = self._stack.pop()
                self.totals[label] += elapsed - inner
                if self._stack:
                    self._stack[-1] += elapsed

        static = isinstance(inspect.getattr_static(owner, attribute), staticmethod)
        self._undo.append((owner, attribute, inspect.getattr_static(owner, attribute)))
        setattr(owner, attribute, staticmethod(timed) if static else timed)

    def reset(self) -> dict[str, float]:
        found, self.totals = dict(self.totals), defaultdict(float)
        return found

    def undo(self) -> None:
        for owner, attribute, original in reversed(self._undo):
            setattr(owner, attribute, original)


def _execute_label(self: Measurement, backend: Any, plan: Any, **kwargs: Any) -> str:
    if kwargs.get("timed"):
        return "timed requests"
    kind = plan.requests[0].kind.value if plan.requests else "none"
    return f"untimed {kind}"


@contextlib.contextmanager
def instrumented() -> Iterator[Phases]:
    """storeprobe's phases, each wrapped in a timer for the duration."""
    phases = Phases()
    phases.wrap(repeats, "open_run", "open run (environment, bucket check, prefix)")
    phases.wrap(repeats.Housekeeping, "writer", "conditional-write check")
    phases.wrap(Measurement, "_bodies", "payload generation")
    phases.wrap(Measurement, "_execute", _execute_label)
    phases.wrap(Measurement, "_confirm_sizes", "size-check listing")
    phases.wrap(repeats, "delete_names", "deletes")
    phases.wrap(repeats, "clear_prefix", "listing after the deletes")
    phases.wrap(repeats, "remove_folders", "prefix removal")
    phases.wrap(measurement, "verify_outcomes", "verification")
    phases.wrap(measurement, "verify_staged", "verification")
    phases.wrap(measurement, "sliced_landings", "landing buffers (allocated, touched)")
    phases.wrap(measurement, "check_memory", "memory check")
    phases.wrap(Measurement, "_judge", "judging (stability, stalls)")
    phases.wrap(local_backend, "evict_from_page_cache", "eviction (fsync + fadvise)")
    try:
        yield phases
    finally:
        phases.undo()


def windows_s(result: Result) -> float:
    return sum(sample.seconds for sample in result.samples)


def measured(
    probe: Probe, operation: str, workload: Workload, phases: Phases
) -> tuple[Result, float, dict[str, float]]:
    """One probe call: its Result, wall seconds and phases (the window split out)."""
    phases.reset()
    start = time.perf_counter()
    result = probe.measure(operation, workload)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"{operation} {workload.describe()} failed: {result.errors}")
    found = phases.reset()
    window = windows_s(result)
    found["engine around the windows"] = found.pop("timed requests", 0.0) - window
    found["windows"] = window
    found["rest (unwrapped)"] = wall - sum(found.values())
    return result, wall, found


@contextlib.contextmanager
def reached(port: int, rtt_ms: float) -> Iterator[str]:
    if rtt_ms == 0:
        yield f"http://127.0.0.1:{port}"
        return
    proxy = DelayProxy(port, delay_s=rtt_ms / 2000).start()
    try:
        yield f"http://127.0.0.1:{proxy.port}"
    finally:
        proxy.stop()


def remote(args: argparse.Namespace, phases: Phases) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    large = Workload(count=1, size=args.large)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as root, rclone_s3(Path(root)) as server:
        for rtt in args.rtt_ms:
            small = Workload(count=args.far_count if rtt >= FAR_MS else 256, size="16KiB")
            with reached(server.port, rtt) as endpoint:
                for streams in args.streams:
                    probe = Probe.from_url(
                        "s3://bench/answer",
                        s3_options(endpoint),
                        streams=streams,
                        client=args.client,
                    )
                    chosen = (("small", small), ("large", large))
                    for name, workload in [(n, w) for n, w in chosen if n in args.workloads]:
                        for operation in ("upload", "download"):
                            result, wall, found = measured(probe, operation, workload, phases)
                            prep = found.get("untimed put", 0.0) if operation == "download" else 0.0
                            window = found["windows"]
                            row = {
                                "rtt_ms": rtt,
                                "streams": streams,
                                "probe": f"{operation} {name}",
                                "workload": workload.describe(),
                                "repeats": len(result.samples),
                                "wall_s": wall,
                                "windows_s": window,
                                "prep_upload_s": prep,
                                "ratio": wall / window,
                                "goal_ratio": wall / (window + prep),
                                "phases": found,
                            }
                            rows.append(row)
                            print(
                                f"  {rtt:g} ms, {streams} st, {operation} {name}: wall "
                                f"{wall:.2f} s, windows {window:.2f} s, prep {prep:.2f} s, "
                                f"wall ÷ (windows + prep) {row['goal_ratio']:.2f}",
                                file=sys.stderr,
                                flush=True,
                            )
    return rows


def best_of(argv: list[str], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - start)
    return best


def local_run(phases: Phases) -> dict[str, Any]:
    """The default ``storeprobe run``: as the CLI, then in-process with phases timed."""
    env_python = [sys.executable]
    start = time.perf_counter()
    done = subprocess.run(
        [*env_python, "-m", "storeprobe", "run", "--no-progress"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    cli_wall = time.perf_counter() - start
    interpreter = best_of([*env_python, "-c", "pass"])
    imports = best_of([*env_python, "-c", "import storeprobe.cli"])
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="storeprobe-local-") as folder:
        probe = Probe.from_url(folder)
        for workload in (Workload.small(), Workload.large()):
            for operation in ("upload", "download"):
                result, wall, found = measured(probe, operation, workload, phases)
                results.append(
                    {
                        "probe": f"{operation} {workload.label}",
                        "wall_s": wall,
                        "windows_s": windows_s(result),
                        "phases": found,
                    }
                )
    return {
        "cli_wall_s": cli_wall,
        "cli_table": done.stdout,
        "interpreter_s": interpreter,
        "import_cli_s": imports,
        "calls": results,
    }


#: the phases in the order a call meets them (others after, alphabetically)
ORDER = (
    "open run (environment, bucket check, prefix)",
    "memory check",
    "conditional-write check",
    "payload generation",
    "size-check listing",
    "untimed head",
    "untimed put",
    "eviction (fsync + fadvise)",
    "landing buffers (allocated, touched)",
    "windows",
    "engine around the windows",
    "verification",
    "deletes",
    "listing after the deletes",
    "prefix removal",
    "judging (stability, stalls)",
    "rest (unwrapped)",
)


def ordered(names: set[str]) -> list[str]:
    known = [n for n in ORDER if n in names]
    return known + sorted(names - set(ORDER))


def print_remote(rows: list[dict[str, Any]]) -> None:
    print(
        "\n| round trip | streams | probe | objects | wall (s) | windows (s) | wall ÷ windows "
        "| prep uploads (s) | wall ÷ (windows + prep) | goal ≤ 1.25 |"
    )
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        download = row["probe"].startswith("download")
        met = row["goal_ratio"] <= GOAL
        print(
            f"| {row['rtt_ms']:g} ms | {row['streams']} | {row['probe']} | {row['workload']} "
            f"| {row['wall_s']:.2f} | {row['windows_s']:.2f} | {row['ratio']:.2f} "
            f"| {row['prep_upload_s']:.2f} | {row['goal_ratio']:.2f} "
            f"| {'met' if met else 'missed'}{'' if download else ' (upload)'} |"
        )
    print("\nWhere each call's time outside its windows went (seconds, all repeats):\n")
    names = ordered({n for row in rows for n in row["phases"] if n != "windows"})
    print("| round trip | streams | probe | " + " | ".join(names) + " |")
    print("|---:|---:|---|" + "---:|" * len(names))
    for row in rows:
        cells = [f"{row['phases'].get(n, 0.0):.2f}" for n in names]
        print(
            f"| {row['rtt_ms']:g} ms | {row['streams']} | {row['probe']} | "
            + " | ".join(cells)
            + " |"
        )


def print_local(found: dict[str, Any]) -> None:
    calls = found["calls"]
    wall = sum(c["wall_s"] for c in calls)
    window = sum(c["windows_s"] for c in calls)
    print(
        f"\nDefault `storeprobe run` on the local disk: {found['cli_wall_s']:.2f} s wall as a "
        f"subprocess; interpreter start-up {found['interpreter_s']:.3f} s, import of the CLI "
        f"{found['import_cli_s'] - found['interpreter_s']:.3f} s more (best of 3 each). "
        f"In this process the four calls took {wall:.2f} s for {window:.2f} s of windows.\n"
    )
    print(found["cli_table"])
    names = ordered({n for call in calls for n in call["phases"]})
    print("| phase | " + " | ".join(c["probe"] for c in calls) + " | all |")
    print("|---|" + "---:|" * (len(calls) + 1))
    for name in names:
        values = [c["phases"].get(name, 0.0) for c in calls]
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {sum(values):.3f} |")
    print(
        "| wall of the call | "
        + " | ".join(f"{c['wall_s']:.3f}" for c in calls)
        + f" | {wall:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, nargs="+", default=[0.0, 20.0, 100.0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--large", default="32MiB", help="size of the large probe's object")
    parser.add_argument(
        "--far-count",
        type=int,
        default=64,
        help=f"objects of the small probes from {FAR_MS:g} ms on (256: the seed probe's)",
    )
    parser.add_argument(
        "--workloads", nargs="+", choices=["small", "large"], default=["small", "large"]
    )
    parser.add_argument("--client", default="auto", choices=["auto", "obstore", "s3fs"])
    parser.add_argument("--skip-remote", action="store_true")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    parse_size(args.large)
    began = time.perf_counter()
    load = Path("/proc/loadavg").read_text().split()[0]
    out: dict[str, Any] = {}
    with instrumented() as phases:
        if not args.skip_remote:
            out["remote"] = remote(args, phases)
        if not args.skip_local:
            out["local"] = local_run(phases)
    end_load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"rclone serve s3 on 127.0.0.1 (small 256 × 16 KiB, {args.far_count} from "
        f"{FAR_MS:g} ms; large "
        f"1 × {args.large}; 3 repeats); load average {load} at the start, {end_load} at "
        f"the end; {time.perf_counter() - began:.0f} s in all"
    )
    if "remote" in out:
        print_remote(out["remote"])
    if "local" in out:
        print_local(out["local"])
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
