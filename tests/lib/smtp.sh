#!/usr/bin/env bash
# Installs the SMTP sink the email tests deliver to: aiosmtpd (PyPI) in a
# venv at target/smtp-venv, which tests/it/support/smtp.rs runs on a free
# 127.0.0.1 port per test. Idempotent: does nothing when it is there.
set -euo pipefail
cd "$(dirname "$0")/../.."

AIOSMTPD_VERSION=1.4.6
VENV="${CARGO_TARGET_DIR:-target}/smtp-venv"

if "$VENV/bin/python" -c 'import aiosmtpd' 2>/dev/null; then
    exit 0
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
    else
        echo "smtp.sh: python3 with the venv module is required (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
echo "== aiosmtpd $AIOSMTPD_VERSION in $VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "aiosmtpd==$AIOSMTPD_VERSION"
"$VENV/bin/python" -c 'import aiosmtpd'
