#!/usr/bin/env bash
# Builds the Flink load job (infra/flink) into one runnable jar in .cache/flink/.
# Idempotent: a stamp of the sources' hash skips the build when nothing changed.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
OUT="$ROOT/.cache/flink"
JAR="$OUT/streamplan-flink-job.jar"
stamp="$OUT/.stamp"
want=$(find pom.xml src -type f | sort | xargs cat | sha256sum | cut -c1-16)
if [ -s "$JAR" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "[flink] job jar up to date: $JAR"
    exit 0
fi
echo "[flink] building the load job with Maven (first time: ~2 min)"
mkdir -p "$OUT"
mvn -q -B package -DskipTests -Dmaven.repo.local="${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}" \
    >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "[flink] build failed"; exit 1; }
cp target/streamplan-flink-job.jar "$JAR"
echo "$want" > "$stamp"
echo "[flink] job jar: $JAR"
