"""How often does the regression gate cry wolf, and how often does it catch a slowdown?

The gate is ``compare_results(base_runs, new_run, fail_slower=T)``, i.e. the rule of
:func:`storeprobe.stats.compare_runs`: a probe is slower when the whole interval of the
ratio new ÷ base, as wide as the base runs differ from one another, lies below 1 − T.

Per storage, a rolling history as in CI: ``--history`` base runs first, then
``--pairs`` steps; each step makes one new run A (same configuration) and, on S3, one
run B at each slowdown, and compares each with the ``--history`` A runs before it; then
A joins the history. A run is one
``Probe.upload`` and one ``Probe.download`` of ``--workload`` with ``--repeats``
repeats, one stream, in this process.

- **A/A** (local disk, and ``rclone serve s3`` through A's delay proxy): a
  pair is a false alarm when the gate fails (any probe slower by more than T).
- **A/B** (S3 only): A goes through a delay proxy (tests/delay_proxy.py) with a one-way
  delay D_A (``--base-delay-ms``, 2 ms), B through one whose delay is larger by ΔD, set
  per probe and per slowdown x: each request gains ≈ 2ΔD, so ΔD = t₀ · x / (1 − x) / 2,
  t₀ A's per-object time measured at the start, makes B's throughput ≈ (1 − x) of A's.
  Before each step ΔD is set again from A's per-object time over its last ``--track``
  (5) runs, so that B follows the load. Optionally (``--calibration-rounds N``, off by
  default) a feedback loop first measures A and B alternately (``--calibration-runs``, 4,
  each per round), fits B's extra time as proportional to ΔD over every round and
  corrects ΔD where the fit gives x; under a load of 13 its rounds were as noisy as runs
  and it set B 2–10 points low. The proxies
  sleep precisely (``--precise``, the default): asyncio ends a sleep on epoll's timeout,
  which is whole milliseconds rounded up, so without it a ΔD of 0.1 ms on top of A's
  2 ms cost B a full extra millisecond each way and a nominal 10 or 20 % became 25.7–31.7 %
  (the reduced runs of the first version). The slowdown realized over the whole run
  (1 − B's level ÷ A's, levels the median of the run medians, with a 95 % bootstrap
  interval over the runs) is printed beside the nominal one. A probe is detected when
  its verdict is "slower".

**Interleaved** (``--interleaved w ...``, 5 and 10): the same runs judged as an A/B job
that runs base and new alternately would be: the last w A runs against the w B runs made
right after each of them (m = w new runs, so drift between steps hits both sides), and
for A/A the even A runs of the last 2w against the odd ones.

The 1-minute load average is read at every step and summarized at the end: the machine
this was written on is shared, and the load is part of the result.

For contrast, the old rule (bootstrap of one base run's repeats against the new run's,
``storeprobe.stats.compare``, regressed when the ratio and the interval's top are below
1 − T) is applied to the same runs, with the latest A run as its base.

Pairs overlap (a rolling window), so they are not independent: read the rates with
their counts. The full run is the defaults (40 pairs per storage, 10 base runs, 3
repeats of 32 × 16 KiB, slowdowns 10, 20 and 40 %, interleaved windows of 5 and 10):

    python benchmarks/gate.py

docs/regressions.md has the figures of three such runs (the third with
``--interleaved 5 10 20``), with the time and the load of each; ``--save-medians PATH``
also writes each run's medians, the verdicts and the loads as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe, Result, Workload
from storeprobe.comparison import compare_results
from storeprobe.render import repeat_figures
from storeprobe.stats import compare
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.servers import rclone_s3

OPERATIONS = ("upload", "download")
Run = dict[str, Result]  # one Result per operation


def run_once(probes: dict[str, Probe], workload: Workload) -> Run:
    run = {operation: probes[operation].measure(operation, workload) for operation in OPERATIONS}  # type: ignore[arg-type]
    for operation, result in run.items():
        if not result.samples:
            raise RuntimeError(f"{operation}: every repeat failed: {result.errors}")
    return run


def medians(runs: list[Run], operation: str) -> list[float]:
    """Each run's median figure (B/s) for ``operation``."""
    return [statistics.median(repeat_figures(run[operation])) for run in runs]


def level(runs: list[Run], operation: str) -> float:
    return statistics.median(medians(runs, operation))


def slowdown(a: list[float], b: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    """1 − median(b) ÷ median(a) of run medians, with a 95 % bootstrap interval over runs."""
    rng = numpy.random.default_rng(0)
    a_boot = numpy.median(rng.choice(a, size=(resamples, len(a))), axis=1)
    b_boot = numpy.median(rng.choice(b, size=(resamples, len(b))), axis=1)
    low, high = numpy.quantile(1 - b_boot / a_boot, [0.025, 0.975])
    return 1 - statistics.median(b) / statistics.median(a), float(low), float(high)


class Tally:
    """Counts of gate outcomes by (storage, case, probe)."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.gate: dict[tuple[str, str], list[bool]] = defaultdict(list)
        self.old: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
        self.spreads: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.loads: dict[str, list[float]] = defaultdict(list)  # 1-minute load, each step

    def add(
        self, storage: str, case: str, history: list[Run], news: list[Run], threshold: float
    ) -> None:
        base = [run[operation] for run in history for operation in OPERATIONS]
        fresh = [run[operation] for run in news for operation in OPERATIONS]
        report = compare_results(base, fresh, fail_slower=threshold)
        for row in report.rows:
            self.verdicts[storage, case, row.identity.operation].append(row.verdict)
            if row.run_spread is not None:
                self.spreads[storage, row.identity.operation].append(row.run_spread)
        self.gate[storage, case].append(report.failed)
        if len(news) != 1:
            return
        new = news[0]
        for operation in OPERATIONS:
            old = compare(repeat_figures(new[operation]), repeat_figures(history[-1][operation]))
            self.old[storage, case, operation].append(
                old.verdict == "slower" and old.ratio < 1 - threshold and old.high < 1 - threshold
            )


def series(
    storage: str,
    a_probes: dict[str, Probe],
    b_probes: dict[str, dict[str, Probe]],
    args: argparse.Namespace,
    tally: Tally,
    realized: dict[tuple[str, str, str], tuple[list[float], list[float]]],
    retune: Callable[[list[Run]], None] = lambda a_runs: None,
) -> None:
    workload = Workload.parse(args.workload)
    history = [run_once(a_probes, workload) for _ in range(args.history)]
    a_runs = list(history)
    b_runs: dict[str, list[Run]] = defaultdict(list)
    started = time.monotonic()
    for pair in range(args.pairs):
        new = run_once(a_probes, workload)
        tally.add(storage, "A/A", history[-args.history :], [new], args.threshold)
        history.append(new)
        a_runs.append(new)
        retune(a_runs)  # B's delays follow A's recent per-object time (--track)
        for w in args.interleaved:  # alternate A runs of the last 2w: the even against the odd
            if len(a_runs) >= 2 * w:
                window = a_runs[-2 * w :]
                tally.add(
                    storage, f"A/A, {w}+{w} interleaved", window[0::2], window[1::2], args.threshold
                )
        for case, probes in b_probes.items():
            slow = run_once(probes, workload)
            b_runs[case].append(slow)
            tally.add(storage, case, history[-args.history - 1 : -1], [slow], args.threshold)
            for w in args.interleaved:  # the last w A runs, each followed by a B run
                if len(b_runs[case]) >= w:
                    tally.add(
                        storage,
                        f"{case}, {w}+{w} interleaved",
                        a_runs[-w:],
                        b_runs[case][-w:],
                        args.threshold,
                    )
        load = os.getloadavg()[0]
        tally.loads[storage].append(load)
        print(
            f"  {storage}: pair {pair + 1}/{args.pairs} ({time.monotonic() - started:.0f} s, "
            f"load average {load:.2f})",
            file=sys.stderr,
            flush=True,
        )
    for case, runs in b_runs.items():
        for operation in OPERATIONS:
            realized[storage, case, operation] = (
                medians(a_runs, operation),
                medians(runs, operation),
            )


def rate(values: list[bool]) -> str:
    return f"{sum(values)}/{len(values)} = {sum(values) / len(values):.1%}" if values else "-"


def report(
    tally: Tally,
    realized: dict[tuple[str, str, str], tuple[list[float], list[float]]],
    formula: dict[tuple[str, str], tuple[float, float]],
) -> str:
    lines = [
        "| storage | case | realized slowdown, 95 % interval (upload, download) "
        "| gate failed (any probe) "
        "| upload: slower / inconclusive / not slower | download: slower / inconclusive / "
        "not slower | old rule, regressed (upload, download) |",
        "|---|---|---|---|---|---|---|",
    ]
    for storage, case in tally.gate:
        cells = []
        for operation in OPERATIONS:
            verdicts = tally.verdicts[storage, case, operation]
            cells.append(
                " / ".join(str(verdicts.count(v)) for v in ("slower", "inconclusive", "not slower"))
                + f" of {len(verdicts)}"
            )
        shown = "-"
        if not case.startswith("A/A"):
            plain = case.split(",")[0]
            shown = ", ".join(
                "{:.1%} ({:.1%}–{:.1%})".format(*slowdown(*realized[storage, plain, op]))
                for op in OPERATIONS
            )
        old = ", ".join(rate(tally.old[storage, case, op]) for op in OPERATIONS)
        lines.append(
            f"| {storage} | {case} | {shown} | {rate(tally.gate[storage, case])} | "
            f"{cells[0]} | {cells[1]} | {old} |"
        )
    lines.append("")
    for (case, op), (first, kept) in formula.items():
        lines.append(
            f"{case}, {op}: B's extra one-way delay ΔD at the start {first * 1e3:.3f} ms from "
            f"A's per-object time"
            + (f", {kept * 1e3:.3f} ms after calibration" if kept != first else "")
        )
    for (storage, operation), spreads in tally.spreads.items():
        lines.append(
            f"{storage}, {operation}: run-to-run spread (sd of log run medians) median "
            f"{statistics.median(spreads):.1%}, range {min(spreads):.1%}–{max(spreads):.1%} "
            f"over {len(spreads)} comparisons"
        )
    for storage, loads in tally.loads.items():
        lines.append(
            f"{storage}: 1-minute load average at the {len(loads)} steps: median "
            f"{statistics.median(loads):.2f}, range {min(loads):.2f}–{max(loads):.2f}"
        )
    return "\n".join(lines)


def op_level(probe: Probe, operation: str, workload: Workload) -> float:
    """One run of one probe: the median of its repeats' figures, in B/s."""
    result = probe.measure(operation, workload)  # type: ignore[arg-type]
    if not result.samples:
        raise RuntimeError(f"{operation}: every repeat failed: {result.errors}")
    return statistics.median(repeat_figures(result))


def measured_slowdown(
    a: Probe, b: Probe, operation: str, workload: Workload, runs: int
) -> tuple[float, float]:
    """1 − B's level ÷ A's over ``runs`` alternating runs each, and A's per-object seconds."""
    a_levels, b_levels = [], []
    for _ in range(runs):
        a_levels.append(op_level(a, operation, workload))
        b_levels.append(op_level(b, operation, workload))
    a_level = statistics.median(a_levels)
    return 1 - statistics.median(
        b_levels
    ) / a_level, workload.total_bytes / a_level / workload.count


def calibrate(
    a: Probe,
    b: Probe,
    proxy: DelayProxy,
    base_delay: float,
    x: float,
    operation: str,
    workload: Workload,
    args: argparse.Namespace,
) -> list[tuple[float, float]]:
    """Set B's extra proxy delay ΔD so that B is slower than A by ``x``, from measurements.

    A feedback loop of ``--calibration-rounds`` rounds: each measures A and B alternately
    (``--calibration-runs`` each) at the current ΔD. B's extra per-object time as a
    fraction of A's, g = realized ÷ (1 − realized), is taken as proportional to ΔD; the
    slope is fitted through the origin to every round so far (one round alone is as noisy
    as runs differ on a loaded machine), and ΔD is set to where the fit gives x ÷ (1 − x).
    Returns the (ΔD in seconds, realized slowdown) of each round; ``proxy.delay_s`` is
    left at the fit of all of them.
    """
    rounds: list[tuple[float, float]] = []
    first = proxy.delay_s - base_delay
    for _ in range(args.calibration_rounds):
        extra = proxy.delay_s - base_delay
        realized, _ = measured_slowdown(a, b, operation, workload, args.calibration_runs)
        rounds.append((extra, realized))
        fractions = [(d, got / (1 - got)) for d, got in rounds if got < 1]
        slope = sum(d * g for d, g in fractions) / sum(d * d for d, _ in fractions)
        wanted = x / (1 - x) / slope if slope > 0 else 4 * first
        proxy.delay_s = base_delay + min(max(wanted, first / 4), first * 4)
    return rounds


def fitted(rounds: list[tuple[float, float]], extra: float) -> float:
    """The slowdown the fit of the calibration rounds gives at ΔD = ``extra``."""
    fractions = [(d, got / (1 - got)) for d, got in rounds if got < 1]
    g = extra * sum(d * g for d, g in fractions) / sum(d * d for d, _ in fractions)
    return g / (1 + g)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=40, help="A/A (and A/B) pairs per storage")
    parser.add_argument("--history", type=int, default=10, help="base runs in each comparison")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workload", default="32x16KiB")
    parser.add_argument("--threshold", type=float, default=0.05, help="--fail-slower (fraction)")
    parser.add_argument(
        "--levels", type=float, nargs="*", default=[0.1, 0.2, 0.4], help="slowdowns for A/B"
    )
    parser.add_argument(
        "--base-delay-ms",
        type=float,
        default=2.0,
        help="A's one-way proxy delay on S3 (B adds to it): both sleep in the proxy, so "
        "the cost of waking up on a loaded machine hits both",
    )
    parser.add_argument(
        "--interleaved",
        type=int,
        nargs="*",
        default=[5, 10],
        help="also judge w A runs against the w runs interleaved with them, for each w",
    )
    parser.add_argument(
        "--precise",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="proxies end each delay with time.sleep, not on asyncio's 1 ms timer",
    )
    parser.add_argument(
        "--track",
        type=int,
        default=5,
        help="before each step, set B's ΔD from A's per-object time over its last N runs "
        "(times the calibration's correction, if any), so that B follows the load (0: not)",
    )
    parser.add_argument(
        "--calibration-rounds",
        type=int,
        default=0,
        help="rounds of the feedback loop per level and operation (0, the default: none; "
        "on a loaded machine its rounds are as noisy as runs, and it set B off by 2–10 points)",
    )
    parser.add_argument(
        "--calibration-runs",
        type=int,
        default=4,
        help="runs of A and of B, alternating, per calibration round",
    )
    parser.add_argument(
        "--save-medians", metavar="PATH", help="write each run's medians and the verdicts as JSON"
    )
    parser.add_argument("--storages", nargs="*", default=["local", "s3"], choices=["local", "s3"])
    args = parser.parse_args()
    tally = Tally()
    realized: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    formula: dict[tuple[str, str], tuple[float, float]] = {}  # ΔD: from t₀, calibrated
    workload = Workload.parse(args.workload)
    print(
        f"gate: {args.pairs} pairs per storage, {args.history} base runs each, {args.repeats} "
        f"repeats of {args.workload} per probe, --fail-slower {args.threshold:.0%}; "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
    )
    with tempfile.TemporaryDirectory() as work:
        if "local" in args.storages:
            local = Probe.from_url(str(Path(work) / "disk"), repeats=args.repeats)
            (Path(work) / "disk").mkdir()
            series("local disk", dict.fromkeys(OPERATIONS, local), {}, args, tally, realized)
        if "s3" in args.storages:
            with rclone_s3(Path(work) / "s3root") as server:
                proxies: list[DelayProxy] = []

                def through(delay_s: float) -> Probe:
                    proxy = DelayProxy(server.port, delay_s, precise=args.precise).start()
                    proxies.append(proxy)
                    options: dict[str, Any] = s3_options(f"http://127.0.0.1:{proxy.port}")
                    return Probe.from_url("s3://bench/gate", options, repeats=args.repeats)

                try:
                    base_delay = args.base_delay_ms / 1e3
                    a_probe = through(base_delay)
                    a_probes = dict.fromkeys(OPERATIONS, a_probe)
                    for operation in OPERATIONS:  # warm up: first runs pay for connections
                        op_level(a_probe, operation, workload)
                    t0 = {
                        op: workload.total_bytes / op_level(a_probe, op, workload) / workload.count
                        for op in OPERATIONS
                    }
                    print(
                        "per-object seconds through the proxy (A): "
                        + ", ".join(f"{op} {t0[op] * 1e3:.3f} ms" for op in OPERATIONS)
                    )
                    b_probes: dict[str, dict[str, Probe]] = {}
                    by_proxy: dict[tuple[str, str], DelayProxy] = {}
                    levels: dict[str, float] = {}
                    for x in args.levels:
                        case = f"B {x:.0%} slower"
                        b_probes[case] = {}
                        for op in OPERATIONS:
                            b = through(base_delay + t0[op] * x / (1 - x) / 2)
                            b_probes[case][op] = b
                            by_proxy[case, op] = proxies[-1]
                            levels[case] = x
                            formula[case, op] = (t0[op] * x / (1 - x) / 2,) * 2
                            if args.calibration_rounds:
                                rounds = calibrate(
                                    a_probe, b, proxies[-1], base_delay, x, op, workload, args
                                )
                                kept = proxies[-1].delay_s - base_delay
                                formula[case, op] = (rounds[0][0], kept)
                                print(
                                    f"calibrated {case}, {op}: "
                                    + "; ".join(
                                        f"+{extra * 1e3:.3f} ms → {got:.1%}"
                                        for extra, got in rounds
                                    )
                                    + f"; kept +{kept * 1e3:.3f} ms, where the fit gives "
                                    f"{fitted(rounds, kept):.1%}",
                                    flush=True,
                                )
                    tracked: dict[tuple[str, str], tuple[float, DelayProxy, float]] = {}
                    for (case, op), (first, kept) in formula.items():
                        x = levels[case]
                        tracked[case, op] = (x, by_proxy[case, op], kept / first)
                    used: dict[tuple[str, str], list[float]] = defaultdict(list)

                    def retune(a_runs: list[Run]) -> None:
                        if not args.track:
                            return
                        recent = a_runs[-args.track :]
                        for (case, op), (x, proxy, scale) in tracked.items():
                            t_a = workload.total_bytes / level(recent, op) / workload.count
                            extra = t_a * x / (1 - x) / 2 * scale
                            proxy.delay_s = base_delay + extra
                            used[case, op].append(extra)

                    series("rclone serve s3", a_probes, b_probes, args, tally, realized, retune)
                    for (case, op), extras in used.items():
                        print(
                            f"tracked {case}, {op}: ΔD over the steps median "
                            f"{statistics.median(extras) * 1e3:.3f} ms, range "
                            f"{min(extras) * 1e3:.3f}–{max(extras) * 1e3:.3f} ms"
                        )
                finally:
                    for proxy in proxies:
                        proxy.stop()
    print(
        f"finished {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
        f"load average now {', '.join(f'{v:.2f}' for v in os.getloadavg())} (1, 5, 15 min)"
    )
    print(report(tally, realized, formula))
    if args.save_medians:
        document = {
            "args": vars(args),
            "medians_B_per_s": {
                f"{storage} | {case} | {op}": {"A": a, "B": b}
                for (storage, case, op), (a, b) in realized.items()
            },
            "verdicts": {" | ".join(key): found for key, found in tally.verdicts.items()},
            "loads": tally.loads,
        }
        Path(args.save_medians).write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
