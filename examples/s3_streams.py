"""Compare one stream with four on an S3 bucket: upload and download of 64 × 16 KiB.

Set STOREPROBE_S3_ENDPOINT, STOREPROBE_S3_KEY and STOREPROBE_S3_SECRET (the test
suite points them at its local S3 server); the bucket is STOREPROBE_S3_BUCKET.
"""

import os

from storeprobe import Probe, Workload

storage_options = {
    "key": os.environ["STOREPROBE_S3_KEY"],
    "secret": os.environ["STOREPROBE_S3_SECRET"],
    "client_kwargs": {
        "endpoint_url": os.environ["STOREPROBE_S3_ENDPOINT"],
        "region_name": "us-east-1",
    },
}
bucket = os.environ.get("STOREPROBE_S3_BUCKET", "bench")
workload = Workload(count=64, size="16KiB")
for streams in (1, 4):
    probe = Probe.from_url(f"s3://{bucket}/storeprobe-example", storage_options, streams=streams)
    for result in (probe.upload(workload), probe.download(workload)):
        print(f"{result.probe:<24} streams={streams}  {result.kib_per_s:10.2f} KiB/s")
