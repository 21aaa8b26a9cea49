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
# Central here: 4.3.1 is the newest present. Its classes do not link against the 4.4.0 client
# (org.apache.kafka.common.utils.Exit moved), so the tools get their own classpath, kafka-tools
# with its own 4.3.1 dependencies (tools-libs/), and talk to the brokers over the wire.
TOOLS_VERSION="${QUIRE_KAFKA_TOOLS_VERSION:-4.3.1}"
LOG4J_VERSION="2.25.3"
CACHE="${QUIRE_KAFKA_CACHE:-$HOME/.cache/quire/kafka-$VERSION}"
LIBS="$CACHE/libs"
TOOLS_LIBS="$CACHE/tools-libs"
STREAMS_LIBS="$CACHE/streams-libs"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need() { command -v "$1" >/dev/null 2>&1 || { echo "install.sh: '$1' not found (apt-get install -y $2)" >&2; exit 1; }; }
need java openjdk-17-jre-headless
need javac openjdk-17-jdk-headless
need mvn maven

kafka_dep() { echo "    <dependency><groupId>org.apache.kafka</groupId><artifactId>$1</artifactId><version>$2</version>${3:-}</dependency>"; }
log4j_deps() {
    for a in log4j-slf4j-impl log4j-api log4j-core log4j-1.2-api; do
        echo "    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>$a</artifactId><version>$LOG4J_VERSION</version></dependency>"
    done
}

# resolve NAME OUT_DIR VERSION DEPENDENCIES...: copy the runtime closure of DEPENDENCIES into
# OUT_DIR, once (OUT_DIR/.complete names the version and a digest of the dependency list).
resolve() {
    local name="$1" out="$2" stamp
    stamp="$3 $(printf '%s\n' "${@:4}" | sha256sum | cut -c1-16)"
    shift 3
    if [[ -f "$out/.complete" ]] && [[ "$(cat "$out/.complete")" = "$stamp" ]]; then
        return
    fi
    mkdir -p "$CACHE/build/$name"
    { echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
      echo "  <groupId>quire.compat</groupId><artifactId>$name</artifactId><version>1</version><packaging>pom</packaging>"
      echo "  <dependencies>"
      printf '%s\n' "$@"
      echo "  </dependencies>"
      echo "</project>"; } > "$CACHE/build/$name/pom.xml"
    rm -rf "$out.tmp"
    echo "resolving $name ($stamp) from Maven Central into $out" >&2
    if ! mvn -B -Dstyle.color=never -f "$CACHE/build/$name/pom.xml" -Dmaven.repo.local="$CACHE/../m2" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
        -DoutputDirectory="$out.tmp" -DincludeScope=runtime > "$CACHE/build/$name/mvn.log" 2>&1; then
        tail -50 "$CACHE/build/$name/mvn.log" >&2
        exit 1
    fi
    echo "$stamp" > "$out.tmp/.complete"
    rm -rf "$out"
    mv "$out.tmp" "$out"
}

resolve kafka-libs "$LIBS" "$VERSION" \
    "$(kafka_dep kafka_2.13 "$VERSION")" "$(kafka_dep kafka-clients "$VERSION")" \
    "$(kafka_dep kafka-server "$VERSION")" "$(kafka_dep kafka-storage "$VERSION")" \
    "$(kafka_dep kafka-metadata "$VERSION")" "$(kafka_dep kafka-raft "$VERSION")" "$(log4j_deps)"
# connect-runtime (a kafka-tools dependency) is excluded: no tool the harness runs uses it, and it
# doubles the download. kafka_2.13 of the same version carries kafka-configs (kafka.admin.ConfigCommand),
# which 4.4.0's kafka_2.13 no longer has (it moved to kafka-tools 4.4.0).
resolve kafka-tools "$TOOLS_LIBS" "$TOOLS_VERSION" \
    "$(kafka_dep kafka-tools "$TOOLS_VERSION" '<exclusions><exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion></exclusions>')" \
    "$(kafka_dep kafka_2.13 "$TOOLS_VERSION")" "$(log4j_deps)"

# kafka-streams 4.3.1 (the newest on Maven Central here) with its own 4.3.1 client, like the tools:
# on the 4.4.0 client it fails at once (NoClassDefFoundError: org.apache.kafka.common.utils.LogContext,
# which moved in 4.4.0). The word-count application
# (java/streams-src) is built against this classpath only.
resolve kafka-streams "$STREAMS_LIBS" "$TOOLS_VERSION" \
    "$(kafka_dep kafka-streams "$TOOLS_VERSION")" "$(log4j_deps)"

# Warnings to stderr only: tool output on stdout stays machine-readable.
if [[ ! -f "$CACHE/log4j2.properties" ]]; then
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
fi

# build SRC OUT LIBS: compile SRC's Java files against LIBS into OUT, whenever the sources change.
build() {
    local src="$1" out="$2" libs="$3" stamp
    if [[ -d "$src" ]] && [[ -n "$(find "$src" -name '*.java' -print -quit)" ]]; then
        stamp="$(find "$src" -name '*.java' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)"
        if [[ ! -f "$out/.stamp" ]] || [[ "$(cat "$out/.stamp")" != "$stamp" ]]; then
            rm -rf "$out.tmp"
            mkdir -p "$out.tmp"
            find "$src" -name '*.java' -print0 | xargs -0 javac -nowarn -encoding UTF-8 --release 17 \
                -cp "$libs/*" -d "$out.tmp"
            echo "$stamp" > "$out.tmp/.stamp"
            rm -rf "$out"
            mv "$out.tmp" "$out"
        fi
    fi
}
# The harness program, and the Streams application on kafka-streams' classpath.
build "$HERE/src" "$CACHE/harness" "$LIBS"
build "$HERE/streams-src" "$CACHE/streams-harness" "$STREAMS_LIBS"
echo "kafka $VERSION ready in $CACHE"
