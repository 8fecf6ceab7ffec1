"""Back up and restore an evolving source tree (six versions) and a disk image (three),
against a local directory and an S3 bucket, at one and four streams; print the table
backup comparisons publish (seconds per step, space used).

Set STOREPROBE_S3_ENDPOINT, STOREPROBE_S3_KEY and STOREPROBE_S3_SECRET (the test
suite points them at its local S3 server); the bucket is STOREPROBE_S3_BUCKET.
STOREPROBE_EXAMPLE_SIZE sets the tree's size (default 64MiB; the tests use less).
"""

import os
import tempfile

from storeprobe import Probe, render
from storeprobe.dataset import Image, Tree

size = os.environ.get("STOREPROBE_EXAMPLE_SIZE", "64MiB")
storage_options = {
    "key": os.environ["STOREPROBE_S3_KEY"],
    "secret": os.environ["STOREPROBE_S3_SECRET"],
    "client_kwargs": {
        "endpoint_url": os.environ["STOREPROBE_S3_ENDPOINT"],
        "region_name": "us-east-1",
    },
}
bucket = os.environ.get("STOREPROBE_S3_BUCKET", "bench")

tree = Tree.source_tree(size=size)
image = Image.create(size, block_size="64KiB")
scenarios = [(tree, 6, "files"), (image, 3, "chunks")]

results = []
with tempfile.TemporaryDirectory() as local:
    for url, options in ((local, None), (f"s3://{bucket}/storeprobe-backup", storage_options)):
        for streams in (1, 4):
            probe = Probe.from_url(url, options, streams=streams)
            for dataset, versions, method in scenarios:
                results.extend(
                    probe.backup_restore(
                        dataset, versions=versions, method=method, chunk_size="1MiB"
                    )
                )

print(render.render_tables(render.backup_tables(results)))
assert all(result.ok for result in results), [result.errors for result in results]
