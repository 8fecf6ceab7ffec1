# ruff: noqa: E501  (exact commands and verdicts: one string each, never wrapped)
"""Run issue 22's cases before and after, on loopback only.

Run as: unshare -n python notes/ev/drive.py [CASE ...]   (a network namespace whose only
interface is lo: nothing can leave the machine). Servers: rclone serve s3 behind a
CountingProxy (requests counted server-side). Outputs go to /tmp/ev/<case>.<tree>.txt.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVIDENCE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(EVIDENCE))
from tests.http_proxy import CountingProxy  # noqa: E402
from tests.servers import S3_KEY, S3_SECRET, rclone_s3  # noqa: E402

TREES = {"before": Path("/work/wt-before"), "after": EVIDENCE}
OUT = Path("/tmp/ev")
OUT.mkdir(exist_ok=True)
W = "--workload 8x16KiB --repeats 1 --no-progress"


def cases(ep: str) -> dict[str, str]:
    return {
        # --- endpoints -----------------------------------------------------------------
        "which": "python -c 'import storeprobe; print(storeprobe.__file__)'",
        "profile_auto": f"$SP run s3://bench/x -o profile=wasabi {W}",
        "profile_s3fs": f"$SP run s3://bench/x -o profile=wasabi --client s3fs {W}",
        "fsspec_env_region": f"FSSPEC_S3_ENDPOINT_URL={ep} AWS_DEFAULT_REGION=eu-central-1 "
        f"AWS_ACCESS_KEY_ID={S3_KEY} AWS_SECRET_ACCESS_KEY={S3_SECRET} $SP run s3://bench/x {W}",
        "fsspec_env_noregion": f"FSSPEC_S3_ENDPOINT_URL={ep} "
        f"AWS_ACCESS_KEY_ID={S3_KEY} AWS_SECRET_ACCESS_KEY={S3_SECRET} $SP run s3://bench/x {W}",
        "aws_endpoint_http": f"AWS_ENDPOINT_URL={ep} AWS_DEFAULT_REGION=eu-central-1 "
        f"AWS_ACCESS_KEY_ID={S3_KEY} AWS_SECRET_ACCESS_KEY={S3_SECRET} $SP run s3://bench/x {W}",
        "fsspec_env_region_s3fs": f"FSSPEC_S3_ENDPOINT_URL={ep} AWS_DEFAULT_REGION=eu-central-1 "
        f"AWS_ACCESS_KEY_ID={S3_KEY} AWS_SECRET_ACCESS_KEY={S3_SECRET} $SP run s3://bench/x --client s3fs {W}",
        "aws_endpoint_http_s3fs": f"AWS_ENDPOINT_URL={ep} AWS_DEFAULT_REGION=eu-central-1 "
        f"AWS_ACCESS_KEY_ID={S3_KEY} AWS_SECRET_ACCESS_KEY={S3_SECRET} $SP run s3://bench/x --client s3fs {W}",
        "aws_profile_env": f"AWS_PROFILE=wasabi $SP run s3://bench/x {W}",
        "docs_region": "grep -rn -E 'AWS_(DEFAULT_)?REGION' $TREE/docs/backends.md $TREE/docs/howto/*.md | head -8",
        # --- compare ---------------------------------------------------------------------
        "compare_default": f"cd $T && $SP run {W} --json a.json >/dev/null && $SP run {W} --json b.json >/dev/null && $SP compare a.json b.json --fail-slower 5%",
        # --- results lost late ----------------------------------------------------------
        "json_missing_dir": f"$SP run {W} --json /missing/dir/x.json",
        "json_not_json": f"cd $T && echo 'hello' > notes.txt && $SP run {W} --json notes.txt",
        "second_target_fails": f'mkdir ok && $SP run $T/ok s3://bench/x -o endpoint_url=http://127.0.0.1:1 -o key=somekey -o secret=somesecret {W} --json both.json; echo exit=$?; python -c \'import json; d=json.load(open("both.json")); print("results in both.json:", len(d["results"]))\'',
        "all_targets_refused": f"$SP run $T/absent $T/gone {W} --json r.json; echo exit=$?; ls r.json",
        "compare_nothing_matched": f"$SP run {W} --json a.json >/dev/null 2>&1 && $SP run --workload 4x16KiB --repeats 1 --no-progress --json b.json >/dev/null 2>&1 && $SP compare a.json b.json --fail-slower 5%",
        # --- tracebacks -----------------------------------------------------------------
        "report_png": 'cd $T && python -c \'open("image.png","wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(64))\' && $SP report image.png',
        "sftp_bad_port": f"$SP run sftp://host:abc/x {W}",
        "memory_colons": f"$SP run memory://x:: {W}",
        "scheduler_dead": f"$SP run --scheduler tcp://127.0.0.1:1 {W}",
        # --- reports (inputs in $S, written by the before tree: see prep) ---------------
        "html_default": "$SP report $S/res.json --html r.html >/dev/null 2>&1; python $EV/html_outline.py r.html",
        "html_unit_plain": "$SP report $S/res.json --html r.html --unit MiB/s --plain >/dev/null 2>&1; python $EV/html_outline.py r.html",
        "crown_terminal": "$SP report $S/res.json --by probe > t.md; head -14 t.md | cut -c1-150; python $EV/widths.py t.md",
        "report_latency": "$SP report $S/res.json --latency | tail -n 20 | cut -c1-160",
        "chart": "python $EV/figure.py report $S/res.json --plot c.png | sed -n '/^\\[figure\\]/,$p'",
        "chart_kib": "python $EV/figure.py report $S/res.json --unit KiB/s --plot c.png | sed -n '/^\\[figure\\]/,$p'",
        "chart_by_probe": "python $EV/figure.py report $S/res.json --by probe --plot c.png | sed -n '/^\\[figure\\]/,$p'",
        "backup_report_plot": "python $EV/figure.py report $S/backup.json --plot b.png | sed -n '/^\\[figure\\]/,$p'",
        "plot_backup": "python $EV/figure.py plot_backup $S/backup.json",
        # --- advice ---------------------------------------------------------------------
        "warn_repeats3": "$SP run memory://bench --workload 8x16KiB --repeats 3 --no-progress 2>&1 | grep -E '^warning' | cut -c1-330",
        "warn_repeats10": "$SP run memory://bench --workload 8x16KiB --repeats 10 --no-progress 2>&1 | grep -E '^warning' | cut -c1-330",
        "warn_file_streams": "$SP run $T --workload 64x4KiB --streams 8 --repeats 3 --no-progress 2>&1 | grep -E '^warning' | cut -c1-330",
        "progress": "$SP run --workload 2x64MiB --repeats 1 --progress 2>err.txt; tr '\\r' '\\n' < err.txt | grep -E '/s' | grep -v '^ *$' | tail -6 | cut -c1-160",
        "tmpfs_default": f"TMPDIR=/dev/shm $SP run {W}",
        # --- figures --------------------------------------------------------------------
        "default_figures": "$SP run --workload small --repeats 1 --no-progress",
        "latency": "$SP run $T --workload 64x4KiB --repeats 2 --no-progress --latency",
        # --- named targets --------------------------------------------------------------
        "rclone_remote": f"RCLONE_CONFIG=$RC $SP run wasabi:bench/x {W}",
        "toml_target": f"cp $S/storeprobe.toml . && cat storeprobe.toml && $SP run lab {W}",
        "o_scoped": f"$SP run s3://bench/x s3://bench/y -o key={S3_KEY} -o secret=$SECRET -o endpoint_url={ep} -o 2:endpoint_url=http://127.0.0.1:1 {W}",
        "crown_word": "$SP report $S/res3.json | head -6; $SP report $S/res3.json --plain | head -6",
        "crown_too_short": "$SP report $S/res2.json | head -6",
        "html_plain_crown": "$SP report $S/res3.json --html r.html --plain >/dev/null 2>&1; python $EV/html_outline.py r.html; $SP report $S/res3.json --html r2.html >/dev/null 2>&1; python $EV/html_outline.py r2.html | grep crown",
    }


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    wanted = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with rclone_s3(root / "s3") as server:
            proxy = CountingProxy(server.port).start()
            ep = f"http://127.0.0.1:{proxy.port}"
            home = root / "home"
            (home / ".aws").mkdir(parents=True)
            (home / ".aws" / "config").write_text(
                f"[profile wasabi]\nregion = eu-central-1\nendpoint_url = {ep}\n"
            )
            (home / ".aws" / "credentials").write_text(
                f"[wasabi]\naws_access_key_id = {S3_KEY}\naws_secret_access_key = {S3_SECRET}\n"
            )
            Path("/tmp/evs/storeprobe.toml").write_text(
                '[targets.lab]\nurl = "s3://bench/x"\nlabel = "lab"\n[targets.lab.options]\nprofile = "wasabi"\n'
            )
            subprocess.run(
                [
                    "rclone",
                    "config",
                    "create",
                    "wasabi",
                    "s3",
                    "provider=Wasabi",
                    f"access_key_id={S3_KEY}",
                    f"secret_access_key={S3_SECRET}",
                    f"endpoint={ep}",
                    "--config",
                    str(root / "rclone.conf"),
                    "--non-interactive",
                ],
                check=True,
                capture_output=True,
            )
            for name, cmd in cases(ep).items():
                if wanted and name not in wanted:
                    continue
                for tree, path in TREES.items():
                    t = root / f"{name}-{tree}"
                    t.mkdir()
                    env = {
                        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FSSPEC_"))
                    }
                    env.update(
                        HOME=str(home),
                        PYTHONPATH=str(path),
                        SP="python -m storeprobe",
                        TREE=str(path),
                        T=str(t),
                        TMPDIR=str(root),
                        COLUMNS="100",
                        S="/tmp/evs",
                        EV=str(EVIDENCE / "notes" / "ev"),
                        RC=str(root / "rclone.conf"),
                        SECRET=S3_SECRET,
                    )
                    proxy.reset()
                    start = time.monotonic()
                    done = subprocess.run(
                        ["bash", "-c", cmd],
                        env=env,
                        cwd=t,
                        capture_output=True,
                        text=True,
                        timeout=180,
                    )
                    took = time.monotonic() - start
                    text = (
                        f"$ {cmd}\n[exit {done.returncode}, {took:.1f} s, requests counted at "
                        f"the loopback S3 proxy: {proxy.requests}, signed for regions {sorted(set(proxy.signed_regions))}]\n--- stdout\n{done.stdout}"
                        f"--- stderr\n{done.stderr}"
                    )
                    (OUT / f"{name}.{tree}.txt").write_text(text)
                    print(
                        f"{name:24} {tree:6} exit={done.returncode} {took:5.1f}s proxy={proxy.requests}",
                        flush=True,
                    )
            proxy.stop()


if __name__ == "__main__":
    main()
