"""Five lines: probe a local directory with the four seed probes and print them."""

import tempfile

from storeprobe import Probe

with tempfile.TemporaryDirectory() as directory:
    probe = Probe.from_url(directory, repeats=3)
    for result in probe.run():
        print(result)
