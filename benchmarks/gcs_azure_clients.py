"""obstore against gcsfs on gcp-storage-emulator, and against adlfs on Azurite, through
storeprobe, in one run: the figures the default client of ``gs://`` and ``abfs://`` is
chosen from.

Starts its own emulators on 127.0.0.1 (as the tests do: ``tests/servers.py``). For each
storage, the probes 256 × 16 KiB and 1 × ``--large`` (64 MiB by default: the GCS
emulator is slow), upload and download, at each of ``--streams`` (1 and 4: the GCS
emulator serves one request at a time with a backlog of 5, so keep it ≤ 4), run through
``Probe.from_url(..., client=X)`` with one repeat each, in ``--rounds`` interleaved
rounds: client A then B in odd rounds, B then A in even ones, so a drift of the machine
hits both alike. Verification is on (untimed), and every Result must be ok.

On the GCS emulator each payload's seed is chosen so that no uploaded body ends with a
byte ``\\r``: gcp-storage-emulator drops it, and the download would come back short.

Prints, per storage, probe and stream count, the median throughput of each client over
the rounds (KiB/s for small objects, MiB/s for the large one), the ratio of medians
obstore ÷ the other client, and each side's spread ((max − min) ÷ median). Where
obstore cannot be measured (gcp-storage-emulator serves only GCS's JSON API; obstore
speaks its XML API), the table says what the emulator answered instead.

    python benchmarks/gcs_azure_clients.py [--rounds 5] [--streams 1 4] [--large 64MiB]
        [--only gcs|azure] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # else gcsfs hangs

from storeprobe import Probe, StoreProbeWarning, Workload
from storeprobe.backends import GCSBackend
from storeprobe.planning import choose
from storeprobe.units import format_size
from tests.conftest import gcs_options
from tests.helpers import gcs_emulator_seed
from tests.servers import azure_connection_string, azurite, gcs_emulator


def part_size(workload: Workload, streams: int) -> int:
    """The part size of a split upload of ``workload`` through gcsfs (0: not split)."""
    if workload.count > 1 or streams == 1:
        return 0
    layout = choose(GCSBackend.capabilities, "gcsfs", "upload", workload, streams)
    return layout.part_size


PROBES = (("upload", "small"), ("download", "small"), ("upload", "large"), ("download", "large"))


def obstore_on_gcs_emulator(port: int) -> str | None:
    """None if obstore's GCS store can put, get and delete on the emulator; else what
    the emulator answered (first failure)."""
    from obstore.store import GCSStore

    store = GCSStore(
        "bench",
        base_url=f"http://127.0.0.1:{port}",
        bearer_token="anonymous",
        client_options={"allow_http": True},
        retry_config={"max_retries": 0},
    )
    key = "storeprobe-benchmark-obstore-check"
    checks: list[tuple[str, Callable[[], object]]] = [
        ("PUT", lambda: store.put(key, b"x", use_multipart=False)),
        ("GET", lambda: store.get(key).bytes()),
        ("HEAD", lambda: store.head(key)),
        ("DELETE", lambda: store.delete(key)),
    ]
    for what, call in checks:
        try:
            call()
        except Exception as exc:
            first = str(exc).splitlines()[0]
            return f"{what}: {first[:160]}"
    return None


def measure(
    url: str,
    options: dict[str, Any],
    client: str,
    operation: str,
    workload: Workload,
    streams: int,
    seed: int | None,
) -> float:
    probe = Probe.from_url(url, options, client=client, streams=streams, repeats=1, seed=seed)
    assert probe.target.client == client, (probe.target.client, client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreProbeWarning)
        result = probe.measure(operation, workload)  # type: ignore[arg-type]
    if not result.ok:
        raise RuntimeError(f"{client} {operation} failed: {result.errors}")
    if result.effective_streams != streams:
        print(f"  note: {client} {operation}: {result.strategy}", file=sys.stderr)
    return float(result.bytes_per_s)


def shown(workload: Workload, bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "—"
    if workload.count > 1:
        return f"{bytes_per_s / 1024:,.0f} KiB/s".replace(",", " ")
    return f"{bytes_per_s / 1024**2:.1f} MiB/s"


def spread(values: list[float]) -> str:
    return f"{(max(values) - min(values)) / statistics.median(values):.0%}"


def run_storage(
    name: str,
    url: str,
    options: dict[str, Any],
    clients: tuple[str, str],
    workloads: dict[str, Workload],
    args: argparse.Namespace,
    figures: dict[str, Any],
    seeds: Mapping[str, int | None],
) -> None:
    active = [c for c in clients if c not in figures.get("unserved", {}).get(name, {})]
    samples: dict[tuple[str, str, str, int], list[float]] = {}
    for number in range(args.rounds):
        order = active if number % 2 == 0 else active[::-1]
        for operation, kind in PROBES:
            for streams in args.streams:
                for client in order:
                    workload = workloads[kind]
                    value = measure(url, options, client, operation, workload, streams, seeds[kind])
                    samples.setdefault((client, operation, kind, streams), []).append(value)
        print(f"  {name}: round {number + 1}/{args.rounds} done", file=sys.stderr)
        if args.json:  # every round kept, should a later one fail
            partial = {"|".join(map(str, key)): values for key, values in samples.items()}
            args.json.write_text(json.dumps({**figures, "partial": {name: partial}}, indent=1))
    figures.setdefault("rounds", {})[name] = {
        "|".join(map(str, key)): values for key, values in samples.items()
    }
    obstore, other = clients
    unserved = figures.get("unserved", {}).get(name, {}).get(obstore)
    print(f"\n### {name}: obstore against {other}, medians of {args.rounds} rounds\n")
    print(
        f"| probe | streams | obstore | {other} | obstore ÷ {other} "
        f"| spread obstore | spread {other} |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for operation, kind in PROBES:
        workload = workloads[kind]
        for streams in args.streams:
            theirs = samples[(other, operation, kind, streams)]
            mine = samples.get((obstore, operation, kind, streams))
            median_other = statistics.median(theirs)
            median_mine = statistics.median(mine) if mine else None
            ratio = f"{median_mine / median_other:.2f}×" if median_mine else "n/a"
            print(
                f"| {operation} {kind} ({workload.count} × {format_size(workload.size)}) "
                f"| {streams} | {shown(workload, median_mine)} | {shown(workload, median_other)} "
                f"| {ratio} | {spread(mine) if mine else '—'} | {spread(theirs)} |"
            )
    if unserved:
        print(f"\nobstore not measured: the emulator refused its XML API requests ({unserved}).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--large", default="64MiB")
    parser.add_argument("--only", choices=["gcs", "azure"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    workloads = {"small": Workload.small(), "large": Workload(count=1, size=args.large)}
    figures: dict[str, Any] = {"streams": args.streams, "large": args.large}
    if args.only in (None, "azure"):
        with azurite() as server:
            options = {"connection_string": azure_connection_string(server.port)}
            import adlfs

            adlfs.AzureBlobFileSystem(**options, skip_instance_cache=True).mkdir("bench")
            run_storage(
                "Azurite", "abfs://bench/clients", options, ("obstore", "adlfs"),
                workloads, args, figures, {"small": None, "large": None},
            )  # fmt: skip
    if args.only in (None, "gcs"):
        # payloads the emulator keeps intact: it drops the trailing \r of an upload's body
        seeds = {
            kind: gcs_emulator_seed(
                *(
                    (workload, part)
                    for part in {0, *(part_size(workload, n) for n in args.streams)}
                ),
                repeats=1,
            )
            for kind, workload in workloads.items()
        }
        with gcs_emulator() as server:
            refused = obstore_on_gcs_emulator(server.port)
            if refused is not None:
                figures.setdefault("unserved", {})["gcp-storage-emulator"] = {"obstore": refused}
            run_storage(
                "gcp-storage-emulator", "gs://bench/clients", gcs_options(server.port),
                ("obstore", "gcsfs"), workloads, args, figures, seeds,
            )  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
