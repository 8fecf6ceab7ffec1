"""Metadata rates through storeprobe against a bare obstore loop, on one local S3 server.

Against ``rclone serve s3`` on 127.0.0.1, for HEAD, LIST and DELETE of ``--count``
empty objects at each of ``--streams``:

- **storeprobe**: ``Probe.from_url("s3://...", client="obstore").metadata(op, count)``
  with ``repeats=1``; its figure is the probe's own (objects ÷ timed window);
- **bare obstore**: obstore's own async API on an ``S3Store``, the same objects written
  untimed first, then timed from before the first request to after the last:
  ``head_async`` / ``delete_async`` per key with at most N in flight (an asyncio
  semaphore), or one ``obstore.list`` of the prefix consumed chunk by chunk.

Each of ``--rounds`` rounds runs both, in alternating order, for every operation and
stream count, so slow drifts of the machine cancel out; the table shows the medians
(operations per second; keys per second for LIST) and the ratio storeprobe ÷ bare
(the issue asks ≥ 0.9). Client and server share this machine's cores.

    python benchmarks/metadata.py [--count 1000] [--streams 1 8] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe
from storeprobe.metadata import METADATA_OPERATIONS, ops_per_s
from tests.conftest import s3_options
from tests.servers import S3_KEY, S3_SECRET, rclone_s3


def storeprobe_rate(options: dict[str, Any], operation: str, count: int, streams: int) -> float:
    probe = Probe.from_url("s3://bench/sp", options, client="obstore", streams=streams, repeats=1)
    result = probe.metadata(operation, count=count)  # type: ignore[arg-type]
    if not result.ok:
        raise RuntimeError(f"storeprobe {operation} failed: {result.errors}")
    return ops_per_s(result)


def bare_rate(store: Any, operation: str, count: int, streams: int) -> float:
    import obstore

    # as deep as storeprobe's names (root/run prefix/repeat/key): rclone lists by directory
    prefix = f"bare/bare-{uuid.uuid4().hex}/r0"
    names = [f"{prefix}/{index:07d}" for index in range(count)]

    async def each(call: Any) -> None:
        semaphore = asyncio.Semaphore(streams)

        async def one(name: str) -> None:
            async with semaphore:
                await call(store, name)

        await asyncio.gather(*(one(name) for name in names))

    async def put(store: Any, name: str) -> None:
        await obstore.put_async(store, name, b"", use_multipart=False)

    async def listing() -> int:
        found = 0
        async for chunk in obstore.list(store, prefix=prefix):
            found += len(chunk)
        return found

    async def run() -> float:
        await each(put)  # untimed
        start = time.perf_counter()
        if operation == "head":
            await each(obstore.head_async)
        elif operation == "delete":
            await each(obstore.delete_async)
        else:
            found = await listing()
        seconds = time.perf_counter() - start
        if operation == "list" and found != count:
            raise RuntimeError(f"bare listing found {found} keys of {count}")
        if operation != "delete":
            await each(obstore.delete_async)  # untimed
        return seconds

    return count / asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from obstore.store import S3Store

    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as work, rclone_s3(Path(work)) as server:
        options = s3_options(server.endpoint)
        store = S3Store(
            "bench",
            config={
                "access_key_id": S3_KEY,
                "secret_access_key": S3_SECRET,
                "endpoint": server.endpoint,
                "region": "us-east-1",
            },
            client_options={"allow_http": True},
        )
        cases = [
            (op, n) for op in METADATA_OPERATIONS for n in args.streams if op != "list" or n == 1
        ]
        for round_number in range(args.rounds):
            for op, streams in cases:
                runners = [
                    ("storeprobe", functools.partial(storeprobe_rate, options)),
                    ("bare obstore", functools.partial(bare_rate, store)),
                ]
                if round_number % 2:
                    runners.reverse()
                for name, runner in runners:
                    rate = runner(op, args.count, streams)
                    figures.setdefault(f"{op}|{streams}|{name}", []).append(rate)
    print(
        f"{args.count} empty objects, rclone serve s3 on 127.0.0.1, medians of "
        f"{args.rounds} interleaved rounds (ops/s; LIST: keys/s)\n"
    )
    print(f"{'operation':<10}{'streams':>8}{'storeprobe':>14}{'bare obstore':>14}{'ratio':>8}")
    rows = []
    for op, streams in cases:
        ours = statistics.median(figures[f"{op}|{streams}|storeprobe"])
        bare = statistics.median(figures[f"{op}|{streams}|bare obstore"])
        rows.append({"operation": op, "streams": streams, "storeprobe": ours, "bare": bare})
        print(f"{op:<10}{streams:>8}{ours:>14.0f}{bare:>14.0f}{ours / bare:>7.2f}×")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "samples": figures}, indent=1))


if __name__ == "__main__":
    main()
