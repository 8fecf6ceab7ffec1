"""The published comparisons' datasets at full size: wall time, timed time, peak RSS.

Each case runs one backup scenario (every version backed up, then each restored and
verified) in a process of its own and reports:

- **wall**: the whole ``Probe.backup_restore`` call, in seconds (what a user waits for);
- **timed**: the sum of its steps' timed windows, in seconds;
- **CPU**: the process's user + system CPU seconds for the whole call;
- **peak RSS**: the process's ``VmHWM`` in MiB, and its growth over the RSS after
  imports (issue 24's goal: about 256 MiB plus what is in flight);
- **chunking/hashing CPU** (apart, in a process of its own): the CPU seconds the
  method's own content work needs over every version, outside any window: for
  ``chunks`` FastCDC plus BLAKE2b of every chunk (``map_chunks``), for ``files`` the
  generation of every version's bytes (what any method pays to make the dataset).

Datasets: ``tree`` is ``Tree.source_tree(scale=1.0)`` (58 000 files, 1.76 GB), six
versions; ``image`` a 4 GiB ``Image`` (64 KiB blocks), three versions. Targets: the
local disk (a directory under ``--work``) and ``rclone serve s3`` on 127.0.0.1 (started
here, its root under ``--work``), reached through the test suite's folder gate (a Python
proxy that sends the first write into a new folder alone: without it rclone v1.75.2
loses objects written into a folder several PUTs create at once).

    python benchmarks/full_size.py [--cases tree:files:local:1 image:chunks:s3:4 ...]
        [--work DIR] [--json FILE] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from storeprobe import Image, Probe, Tree

def rss_mib(field):
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith(field)) / 1024

kind, method, url, streams = {kind!r}, {method!r}, {url!r}, {streams}
options = {options!r}
first = (Tree.source_tree(scale={scale!r}, seed=1) if kind == "tree"
         else Image.create("4GiB", block_size="64KiB", seed=1))
count = 6 if kind == "tree" else 3
base = rss_mib("VmRSS")
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu0 = usage.ru_utime + usage.ru_stime
start = time.perf_counter()
results = Probe.from_url(url, options, streams=streams).backup_restore(
    first, versions=count, method=method)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{
    "ok": all(r.ok for r in results),
    "errors": [str(e) for r in results for e in r.errors][:3],
    "wall_s": wall,
    "timed_s": sum(s.seconds for r in results for s in r.samples),
    "cpu_s": usage.ru_utime + usage.ru_stime - cpu0,
    "peak_mib": rss_mib("VmHWM"),
    "base_mib": base,
    "files": len(first.files),
    "bytes": first.total_bytes,
}}))
"""

CONTENT = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from storeprobe import Image, Tree
from storeprobe.manifest import Chunking, map_chunks

kind, method = {kind!r}, {method!r}
first = (Tree.source_tree(scale={scale!r}, seed=1) if kind == "tree"
         else Image.create("4GiB", block_size="64KiB", seed=1))
chain = [first]
for _ in range((6 if kind == "tree" else 3) - 1):
    chain.append(chain[-1].evolve())
start = time.process_time()
for version in chain:
    if method == "chunks":
        map_chunks("p", version, Chunking())
    else:
        for file in version.files:
            for at in range(0, file.size, 8 << 20):
                version.payload(file, at, min(file.size, at + (8 << 20)))
print(json.dumps({{"content_cpu_s": time.process_time() - start}}))
"""


def _last_json(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"ok": False, "errors": [done.stderr[-1500:]]}
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rclone(root: Path) -> tuple[list[subprocess.Popen[bytes]], str]:
    """rclone serve s3 over ``root``, reached through the test suite's folder gate
    (``tests/folder_gate.py``: the first write into a new folder goes alone, else rclone
    v1.75.2 loses objects that several PUTs write while they make one folder at once)."""
    (root / "bench").mkdir(parents=True, exist_ok=True)
    port = _free_port()
    server = subprocess.Popen(
        ["rclone", "serve", "s3", "--auth-key", "testkey,testsecret",
         "--addr", f"127.0.0.1:{port}", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    gate = subprocess.Popen(
        [sys.executable, "-m", "tests.folder_gate", str(port), str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    assert gate.stdout is not None
    gate_port = int(gate.stdout.readline())  # printed once it listens
    return [server, gate], f"http://127.0.0.1:{gate_port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["tree:files:local:1"])
    parser.add_argument("--work", default=str(ROOT))
    parser.add_argument("--json")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="the tree's scale (1.0: the full tree)"
    )
    args = parser.parse_args()
    print("| dataset | method | target | streams | wall s | timed s | CPU s | "
          "content CPU s | peak RSS MiB | growth MiB |")  # fmt: skip
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|", flush=True)
    rows = []
    os.makedirs(args.work, exist_ok=True)
    for case in args.cases:
        kind, method, where, streams = case.split(":")
        with tempfile.TemporaryDirectory(dir=args.work, prefix="full-size-") as scratch:
            servers: list[subprocess.Popen[bytes]] = []
            options: dict[str, object] = {}
            if where == "s3":
                servers, endpoint = _rclone(Path(scratch) / "s3root")
                url = f"s3://bench/{kind}-{method}"
                options = {
                    "key": "testkey",
                    "secret": "testsecret",
                    "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
                }
            else:
                url = str(Path(scratch) / "disk")
                os.mkdir(url)
            env_tmp = Path(scratch) / "tmp"
            env_tmp.mkdir()
            code = CASE.format(
                root=str(ROOT), kind=kind, method=method, url=url, streams=int(streams),
                options=options, scale=args.scale,
            )  # fmt: skip
            os.environ["TMPDIR"] = str(env_tmp)
            try:
                figures = _last_json(code)
            finally:
                for server in servers:
                    server.terminate()
                    server.wait(timeout=30)
                shutil.rmtree(Path(scratch) / "s3root", ignore_errors=True)
        content = _last_json(
            CONTENT.format(root=str(ROOT), kind=kind, method=method, scale=args.scale)
        )
        row = {"case": case, **figures, **content}
        rows.append(row)
        if not figures.get("ok"):
            print(f"| {kind} | {method} | {where} | {streams} | failed: {figures.get('errors')} |")
            continue
        print(
            f"| {kind} | {method} | {where} | {streams} | {figures['wall_s']:.1f} | "
            f"{figures['timed_s']:.1f} | {figures['cpu_s']:.1f} | "
            f"{content.get('content_cpu_s', float('nan')):.1f} | {figures['peak_mib']:.0f} | "
            f"{float(figures['peak_mib']) - float(figures['base_mib']):.0f} |",  # type: ignore[arg-type]
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
