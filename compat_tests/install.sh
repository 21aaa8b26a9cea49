#!/usr/bin/env bash
# Installs everything the compat suite needs on a Debian machine: kcat, node/npm, a JDK and
# Maven (apt, only what is missing), kafkajs (npm ci from the lock file), Apache Kafka's jars and
# the Java harness (Maven Central), and the pinned Kafka jars the codec generator reads (the
# differential tests encode requests with the generated code). Idempotent and fast when done.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}" \
        || { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; }
fi

"$here/js/install.sh"
bash "$here/java/install.sh"
bash "$here/spark/install.sh"  # Spark's Kafka connector (when PySpark is installed)
(cd "$here/.." && python3 -m kafka_wire.codegen.jars >/dev/null)
