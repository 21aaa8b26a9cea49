#!/usr/bin/env bash
# Resolve Spark's own Kafka connector (spark-sql-kafka-0-10, Scala 2.13, the version of the
# installed PySpark) and its runtime closure from Maven Central into a cache, so that tests pass
# the jars to Spark (`spark.jars`) instead of resolving `spark.jars.packages` at run time.
# Idempotent: with the cache present it returns at once. Skipped when PySpark is not installed.
#
#   QUIRE_SPARK_CACHE           cache dir (default ~/.cache/quire/spark-<pyspark version>)
#   QUIRE_SPARK_KAFKA_FALLBACK  connector version used when the PySpark one is not on Maven
#                               Central (default 4.2.0: PyPI has pyspark 4.3.0, Central's newest
#                               spark-sql-kafka-0-10_2.13 is 4.2.0; the connector uses only
#                               Spark's public DataSource V2 API, which 4.3 keeps)
set -euo pipefail

PYSPARK="$(python3 -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || true)"
if [[ -z "$PYSPARK" ]]; then
    echo "pyspark not installed: Spark's Kafka connector not resolved" >&2
    exit 0
fi
FALLBACK="${QUIRE_SPARK_KAFKA_FALLBACK:-4.2.0}"
CACHE="${QUIRE_SPARK_CACHE:-$HOME/.cache/quire/spark-$PYSPARK}"
OUT="$CACHE/kafka-connector"
if [[ -f "$OUT/.complete" ]]; then
    echo "spark-sql-kafka $(cat "$OUT/.complete") ready in $OUT"
    exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "install.sh: 'mvn' not found (apt-get install -y maven)" >&2; exit 1; }
mkdir -p "$CACHE/build"
# Spark itself (provided scope in the connector's pom) comes with PySpark; only the connector,
# its token provider, kafka-clients and commons-pool2 are needed on top.
resolve() {
    local version="$1"
    cat > "$CACHE/build/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>quire.compat</groupId><artifactId>spark-kafka</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$OUT.tmp"
    echo "resolving spark-sql-kafka-0-10_2.13 $version from Maven Central into $OUT" >&2
    mvn -B -Dstyle.color=never -f "$CACHE/build/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
        -DoutputDirectory="$OUT.tmp" -DincludeScope=runtime > "$CACHE/build/mvn-$version.log" 2>&1
}
VERSION="$PYSPARK"
if ! resolve "$VERSION"; then
    VERSION="$FALLBACK"
    if ! resolve "$VERSION"; then
        tail -50 "$CACHE/build/mvn-$VERSION.log" >&2
        exit 1
    fi
fi
echo "$VERSION" > "$OUT.tmp/.complete"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "spark-sql-kafka $VERSION ready in $OUT"
