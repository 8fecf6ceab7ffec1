"""How long deleting n names takes at so many names a request: 1 (one request per name),
ceil(n / prep_streams) (every request in flight at once) and 1000 (S3's DeleteObjects
limit, what storeprobe sends), through obstore and s3fs.

``rclone serve s3`` on 127.0.0.1 behind ``tests/delay_proxy.py`` (``--rtt-ms``, 20 by
default), n = 256 objects of 16 KiB written before each measurement; each figure is the
wall time of one ``storeprobe.execution.delete_names`` call at ``prep_streams`` (32) in
flight. The names a request carries are set by a subclass of each client's backend with
``Capabilities.deletes_per_request`` changed (nothing else differs).

    python benchmarks/bulk_delete.py [--rtt-ms 20] [--count 256] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe.backends.obstore import ObstoreBackend
from storeprobe.backends.s3fs import S3Backend
from storeprobe.execution import delete_names
from storeprobe.target import Target
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.helpers import StepClock
from tests.servers import rclone_s3

PREP_STREAMS = 32


def with_batches(base: type[ObstoreBackend] | type[S3Backend], per: int) -> type:
    """``base`` deleting at most ``per`` names a request."""
    capabilities = attrs.evolve(base.capabilities, deletes_per_request=per)
    return type(f"{base.__name__}Per{per}", (base,), {"capabilities": capabilities})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--count", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spread = math.ceil(args.count / PREP_STREAMS)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as root, rclone_s3(Path(root)) as server:
        (Path(root) / "bench").mkdir(exist_ok=True)
        proxy = DelayProxy(server.port, delay_s=args.rtt_ms / 2000).start()
        try:
            print(f"| client | names a request | requests | seconds per delete of {args.count} |")
            print("|---|---:|---:|---|")
            bases: dict[str, type[ObstoreBackend] | type[S3Backend]] = {
                "obstore": ObstoreBackend,
                "s3fs": S3Backend,
            }
            for client, base in bases.items():
                for per in (1, spread, 1000):
                    url = f"s3://bench/bulk-{client}-{per}"
                    opened = Target.from_url(
                        url, s3_options(f"http://127.0.0.1:{proxy.port}"), client=client
                    )
                    target = Target(
                        opened.fs, opened.root, backend=with_batches(base, per)(opened.fs)
                    )
                    seconds = []
                    for round_ in range(args.rounds):
                        names = [f"{target.root}/{round_}/{i}" for i in range(args.count)]
                        target.fs.pipe_file(names[0], bytes(16384))  # the folder, alone
                        target.fs.pipe({name: bytes(16384) for name in names[1:]})
                        start = time.perf_counter()
                        left = delete_names(
                            target, names, streams=PREP_STREAMS, clock=StepClock(), timeout=60.0
                        )
                        seconds.append(time.perf_counter() - start)
                        if left:
                            raise SystemExit(f"not deleted: {left[:3]}")
                    requests = math.ceil(args.count / per)
                    shown = " ".join(f"{s:.3f}" for s in seconds)
                    print(f"| {client} | {per} | {requests} | {shown} |", flush=True)
        finally:
            proxy.stop()
    print(f"\n{args.rtt_ms:g} ms round trip, {PREP_STREAMS} requests in flight at most")


if __name__ == "__main__":
    main()
