#!/usr/bin/env bash
# Resolve Apache Kafka's jars from Maven Central into a cache and build the harness's Java
# program against them. Idempotent: a second run with the cache present takes well under 1 s.
#
#   QUIRE_KAFKA_VERSION        Kafka version (default 4.4.0)
#   QUIRE_KAFKA_TOOLS_VERSION  kafka-tools version (default 4.3.1, see below)
#   QUIRE_KAFKA_CACHE          cache dir (default ~/.cache/quire/kafka-<version>)
set -euo pipefail

VERSION="${QUIRE_KAFKA_VERSION:-4.4.0}"
# kafka-tools 4.4.0 (and kafka-streams 4.4.0, which the harness does not use) are not on Maven
# Central here: 4.3.1 is the newest present. Every other Kafka module, including those
# kafka-tools pulls in, is held at $VERSION by the dependencyManagement below, so the tools run
# on the 4.4.0 client and server code.
TOOLS_VERSION="${QUIRE_KAFKA_TOOLS_VERSION:-4.3.1}"
LOG4J_VERSION="2.25.3"
CACHE="${QUIRE_KAFKA_CACHE:-$HOME/.cache/quire/kafka-$VERSION}"
LIBS="$CACHE/libs"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need() { command -v "$1" >/dev/null 2>&1 || { echo "install.sh: '$1' not found (apt-get install -y $2)" >&2; exit 1; }; }
need java openjdk-17-jre-headless
need javac openjdk-17-jdk-headless
need mvn maven

if [[ ! -f "$LIBS/.complete" ]]; then
    mkdir -p "$CACHE/build"
    # connect-runtime (a kafka-tools dependency) is excluded: no tool the harness runs uses it,
    # and it doubles the download.
    cat > "$CACHE/build/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>quire.compat</groupId>
  <artifactId>kafka-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server-common</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage-api</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-metadata</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-raft</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools-api</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-coordinator-common</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-group-coordinator</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-group-coordinator-api</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-share-coordinator</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-transaction-coordinator</artifactId><version>$VERSION</version></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$TOOLS_VERSION</version>
      <exclusions><exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-metadata</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-raft</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-1.2-api</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$LIBS.tmp"
    echo "resolving Apache Kafka $VERSION jars from Maven Central into $LIBS" >&2
    if ! mvn -B -Dstyle.color=never -f "$CACHE/build/pom.xml" -Dmaven.repo.local="$CACHE/../m2" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
        -DoutputDirectory="$LIBS.tmp" -DincludeScope=runtime > "$CACHE/build/mvn.log" 2>&1; then
        tail -50 "$CACHE/build/mvn.log" >&2
        exit 1
    fi
    rm -rf "$LIBS"
    mv "$LIBS.tmp" "$LIBS"
    # Warnings to stderr only: tool output on stdout stays machine-readable.
    cat > "$CACHE/log4j2.properties" <<'L4J'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
L4J
    echo "$VERSION tools $TOOLS_VERSION" > "$LIBS/.complete"
fi

# The harness program: rebuilt whenever its sources change.
SRC="$HERE/src"
OUT="$CACHE/harness"
if [[ -d "$SRC" ]] && [[ -n "$(find "$SRC" -name '*.java' -print -quit)" ]]; then
    STAMP="$(find "$SRC" -name '*.java' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)"
    if [[ ! -f "$OUT/.stamp" ]] || [[ "$(cat "$OUT/.stamp")" != "$STAMP" ]]; then
        rm -rf "$OUT.tmp"
        mkdir -p "$OUT.tmp"
        find "$SRC" -name '*.java' -print0 | xargs -0 javac -nowarn -encoding UTF-8 --release 17 \
            -cp "$LIBS/*" -d "$OUT.tmp"
        echo "$STAMP" > "$OUT.tmp/.stamp"
        rm -rf "$OUT"
        mv "$OUT.tmp" "$OUT"
    fi
fi
echo "kafka $VERSION ready in $CACHE"
