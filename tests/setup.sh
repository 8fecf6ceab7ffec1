#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine: the package with its test
# tools (pip), the Azure emulator Azurite (npm, into ./node_modules) and OpenSSH's sshd
# (apt). The servers themselves are started and stopped by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q -e '.[dev]'
if [ ! -x node_modules/.bin/azurite-blob ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
fi
