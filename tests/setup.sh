#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine: the package with its test
# tools (pip), the Azure emulator Azurite (npm, into ./node_modules), OpenSSH's sshd,
# iproute2, e2fsprogs, Chromium, librsync2, rdiff, strace and the backup tools restic,
# rdiff-backup, duplicity, rsync and rsnapshot (apt). The servers themselves are started and stopped
# by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q -e '.[dev]'
if [ ! -x node_modules/.bin/azurite-blob ]; then
  # npm ci installs exactly what package-lock.json pins and never rewrites it
  npm ci --no-audit --no-fund --loglevel=error
fi
# sshd for SFTP; ip/tc (iproute2) for the shaped-link accuracy tests; chattr (e2fsprogs)
# for the read-only-directory test; chromium for the HTML report's headless-browser test
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
command -v chattr >/dev/null || missing+=(e2fsprogs)
command -v chromium >/dev/null || missing+=(chromium)
# librsync2 for storeprobe.delta (ctypes); rdiff is what tests/test_delta.py compares it with
ldconfig -p | grep 'librsync\.so\.2' >/dev/null || missing+=(librsync2)
command -v rdiff >/dev/null || missing+=(rdiff)
# the real backup tools the backup methods are proven against (tests/backup_tools.py);
# duplicity's boto3+s3:// backend imports boto3 from Debian's /usr/bin/python3
for tool in restic rdiff-backup duplicity rsync rsnapshot; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
/usr/bin/python3 -c 'import boto3' 2>/dev/null || missing+=(python3-boto3)
# strace: what rsnapshot's and rdiff-backup's restores read from their target
command -v strace >/dev/null || missing+=(strace)
# duplicity's paramiko+sftp:// backend imports paramiko (Debian's duplicity only
# recommends it)
/usr/bin/python3 -c 'import paramiko' 2>/dev/null || missing+=(python3-paramiko)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
