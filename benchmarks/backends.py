"""The four seed probes on every backend, against real servers on 127.0.0.1.

Starts rclone serve s3, moto, gcp-storage-emulator, Azurite and sshd (as the tests do),
runs upload/download × small (256 × 16 KiB) / large (1 × 256 MiB) at the given stream
counts, best of 3, and prints a markdown table (KiB/s for small, MiB/s for large) with
each figure's ratio to the local-disk baseline measured in the same run.

    python benchmarks/backends.py [--streams 1 4] [--repeats 3] [--json out.json]
             [--only s3fs obstore ...]

Client and servers share this machine's cores: the figures describe this machine, not
the storages' products.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import s3fs

from storeprobe import Probe, Result, Workload, dump_results
from tests.conftest import gcs_options, obstore_fs, s3_options, ssh_options
from tests.servers import (
    S3_KEY,
    S3_SECRET,
    azure_connection_string,
    azurite,
    gcs_emulator,
    moto_s3,
    rclone_s3,
    sshd,
)

Factory = Callable[[int, int], Probe]


@contextlib.contextmanager
def storages(work: Path, only: set[str]) -> Iterator[dict[str, Factory]]:
    with contextlib.ExitStack() as stack:
        made: dict[str, Factory] = {}
        local = work / "local"
        local.mkdir()
        made["local"] = lambda s, r: Probe.from_url(str(local), streams=s, repeats=r)
        if "s3fs" in only:
            rc = stack.enter_context(rclone_s3(work / "s3root"))
            made["s3fs"] = lambda s, r: Probe.from_url(
                "s3://bench/b", s3_options(rc.endpoint), client="s3fs", streams=s, repeats=r
            )
            made["obstore (rclone, default S3 path)"] = lambda s, r: Probe.from_url(
                "s3://bench/b", s3_options(rc.endpoint), streams=s, repeats=r
            )
        if "obstore" in only:
            moto = stack.enter_context(moto_s3())
            s3fs.S3FileSystem(
                key=S3_KEY,
                secret=S3_SECRET,
                client_kwargs={"endpoint_url": moto.endpoint},
                skip_instance_cache=True,
            ).mkdir("bench")
            made["obstore (moto)"] = lambda s, r: Probe(
                obstore_fs(moto.endpoint), "bench/b", streams=s, repeats=r
            )
        if "gcsfs" in only:
            gcs = stack.enter_context(gcs_emulator())
            made["gcsfs"] = lambda s, r: Probe.from_url(
                "gs://bench/b", gcs_options(gcs.port), streams=s, repeats=r
            )
        if "adlfs" in only:
            az = stack.enter_context(azurite())
            options = {"connection_string": azure_connection_string(az.port)}
            import adlfs

            adlfs.AzureBlobFileSystem(skip_instance_cache=True, **options).mkdir("bench")
            made["adlfs"] = lambda s, r: Probe.from_url(
                "abfs://bench/b", options, streams=s, repeats=r
            )
        if "sshfs" in only:
            ssh = stack.enter_context(sshd(work / "sshd"))
            made["sshfs"] = lambda s, r: Probe.from_url(
                f"sftp://127.0.0.1{ssh.root}", ssh_options(ssh), streams=s, repeats=r
            )
        made["memory"] = lambda s, r: Probe.from_url("memory://bench", streams=s, repeats=r)
        yield made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="+", default=["s3fs", "obstore", "gcsfs", "adlfs", "sshfs"])
    args = parser.parse_args()
    seeds = [Workload.small(), Workload.large()]
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as work, storages(Path(work), set(args.only)) as made:
        rows = []
        baseline: dict[tuple[int, str], float] = {}
        for name, factory in made.items():
            for streams in args.streams:
                probe = factory(streams, args.repeats)
                cells = []
                for workload in seeds:
                    for operation in ("upload", "download"):
                        result = probe.measure(operation, workload)
                        results.append(result)
                        print(f"  {name}: {result}", file=sys.stderr, flush=True)
                        key = (streams, result.probe)
                        if not result.samples:
                            cells.append("failed")
                            continue
                        figure = result.kib_per_s if workload.name == "small" else result.mib_per_s
                        if name == "local":
                            baseline[key] = figure
                        ratio = figure / baseline[key] if key in baseline else float("nan")
                        note = "" if result.effective_streams == streams else "¹"
                        cells.append(f"{figure:,.0f}{note} ({ratio:.2f}×)")
                rows.append((name, streams, cells))
    columns = ["backend", "streams", "small up KiB/s", "small down KiB/s"]
    columns += ["large up MiB/s", "large down MiB/s"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, streams, cells in rows:
        print(f"| {name} | {streams} | " + " | ".join(cells) + " |")
    print("\n(×) ratio to local disk in the same run; ¹ fewer streams were possible than asked")
    if args.json:
        args.json.write_text(dump_results(results))


if __name__ == "__main__":
    main()
