#!/usr/bin/env bash
# Installs the kafkajs scenarios' dependencies (npm ci from the committed lock file).
# Idempotent: does nothing when node_modules already matches package-lock.json.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get install -y --no-install-recommends nodejs npm
fi
stamp=node_modules/.quire-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d node_modules/kafkajs ]; then
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
