"""The private-endpoints how-to's commands, against rclone serve s3 over HTTPS with a CA
made here (loopback only: run under unshare -n). Prints each command's exit and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

EVIDENCE = Path(__file__).resolve().parents[2]
sys.path.append(str(EVIDENCE))
from tests.servers import S3_KEY, S3_SECRET, rclone_s3  # noqa: E402
from tests.tls import make_certificates  # noqa: E402

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
W = ["--workload", "8x16KiB", "--repeats", "1", "--no-progress"]
with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    certs = make_certificates(root / "ca")
    with rclone_s3(root / "s3", extra=("--cert", str(certs.cert), "--key", str(certs.key))) as s:
        ep = f"https://127.0.0.1:{s.port}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
            base.pop(name, None)
        base.update(PYTHONPATH=str(EVIDENCE), HOME=str(root))

        def run(label: str, options: dict[str, object], *extra: str, **env: str) -> None:
            argv = [
                sys.executable,
                "-m",
                "storeprobe",
                "run",
                "s3://bench/x",
                "-o",
                f"key={S3_KEY}",
                "-o",
                f"secret={S3_SECRET}",
                "-o",
                f"client_kwargs={json.dumps(options)}",
                *W,
                *extra,
            ]
            done = subprocess.run(
                argv, env={**base, **env}, cwd=root, capture_output=True, text=True
            )
            given = json.dumps(options).replace(ep, "https://127.0.0.1:PORT")
            given = given.replace(str(certs.ca), "ca.pem")
            variables = " ".join(f"{k}={v}" for k, v in env.items()).replace(
                str(certs.ca), "ca.pem"
            )
            shown = (
                f"{variables} storeprobe run s3://bench/x -o key=... -o secret=... "
                f"-o 'client_kwargs={given}' {' '.join(extra)}"
            )
            print(f"### {label}\n$ {shown.strip()}\n[exit {done.returncode}]")
            print(
                (done.stdout + done.stderr)
                .replace(str(certs.ca), "ca.pem")
                .replace(ep, "https://127.0.0.1:PORT")
                .strip(),
                "\n",
            )

        run("verify, default client (obstore)", {"endpoint_url": ep, "verify": str(certs.ca)})
        run("verify, s3fs", {"endpoint_url": ep, "verify": str(certs.ca)}, "--client", "s3fs")
        run("AWS_CA_BUNDLE, obstore", {"endpoint_url": ep}, AWS_CA_BUNDLE=str(certs.ca))
        run(
            "SSL_CERT_FILE, s3fs",
            {"endpoint_url": ep},
            "--client",
            "s3fs",
            SSL_CERT_FILE=str(certs.ca),
        )
        run("verification off", {"endpoint_url": ep, "verify": False})
        run("no CA", {"endpoint_url": ep})
        run(
            "checksum mode given",
            {"endpoint_url": ep, "verify": str(certs.ca)},
            "--client",
            "s3fs",
            AWS_REQUEST_CHECKSUM_CALCULATION="when_supported",
        )
