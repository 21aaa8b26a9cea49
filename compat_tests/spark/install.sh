#!/usr/bin/env bash
# Resolve Spark's own Kafka connector (spark-sql-kafka-0-10, Scala 2.13, the version of the
# installed PySpark) and its runtime closure from Maven Central into a cache, so that tests pass
# the jars to Spark (`spark.jars`) instead of resolving `spark.jars.packages` at run time.
# Idempotent: with the cache present it returns at once. Skipped when PySpark is not installed.
#
#   QUIRE_SPARK_CACHE  cache dir (default ~/.cache/quire/spark-<version>)
set -euo pipefail

VERSION="$(python3 -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || true)"
if [[ -z "$VERSION" ]]; then
    echo "pyspark not installed: Spark's Kafka connector not resolved" >&2
    exit 0
fi
CACHE="${QUIRE_SPARK_CACHE:-$HOME/.cache/quire/spark-$VERSION}"
OUT="$CACHE/kafka-connector"
if [[ -f "$OUT/.complete" ]] && [[ "$(cat "$OUT/.complete")" = "$VERSION" ]]; then
    echo "spark-sql-kafka $VERSION ready in $OUT"
    exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "install.sh: 'mvn' not found (apt-get install -y maven)" >&2; exit 1; }
mkdir -p "$CACHE/build"
# Spark itself (provided scope in the connector's pom) comes with PySpark; only the connector,
# its token provider, kafka-clients and commons-pool2 are needed on top.
cat > "$CACHE/build/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>quire.compat</groupId><artifactId>spark-kafka</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM
rm -rf "$OUT.tmp"
echo "resolving spark-sql-kafka-0-10_2.13 $VERSION from Maven Central into $OUT" >&2
if ! mvn -B -Dstyle.color=never -f "$CACHE/build/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$OUT.tmp" -DincludeScope=runtime > "$CACHE/build/mvn.log" 2>&1; then
    tail -50 "$CACHE/build/mvn.log" >&2
    exit 1
fi
echo "$VERSION" > "$OUT.tmp/.complete"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "spark-sql-kafka $VERSION ready in $OUT"
