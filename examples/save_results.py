"""Measure, save the results as versioned JSON, load them back, compare the figures."""

import tempfile
from pathlib import Path

from storeprobe import Probe, Workload, dump_results, load_results

with tempfile.TemporaryDirectory() as directory:
    probe = Probe.from_url(directory, repeats=2, label="example-machine")
    results = [probe.upload(Workload(count=16, size="64KiB")), probe.download_small()]
    path = Path(directory) / "results.json"
    path.write_text(dump_results(results))
    loaded = load_results(path.read_text())
    assert loaded == results
    for result in loaded:
        print(f"{result.probe}: {result.kib_per_s:.2f} KiB/s, median {result.median_kib_per_s:.2f}")
