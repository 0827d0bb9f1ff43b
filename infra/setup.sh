#!/usr/bin/env bash
# Idempotent setup for a fresh clone: .venv with the pinned dependencies, Delta Lake jars from
# Maven Central into .cache/jars (Spark gets local jar paths, nothing downloads at session start).
# A second run only checks stamps and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3.11}
VENV="$ROOT/.venv"
JARS="$ROOT/.cache/jars"
DELTA_ARTIFACTS=("io.delta:delta-spark_4.2_2.13:4.4.0" "io.delta:delta-storage:4.4.0")

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV with $($PY --version)"
    "$PY" -m venv "$VENV"
fi

stamp="$VENV/.streamplan-deps"
want=$(cat pyproject.toml infra/requirements.lock | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "[setup] installing pinned dependencies (first time: ~3 min)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        -c infra/requirements.lock -e .
    "$VENV/bin/pip" check
    echo "$want" > "$stamp"
else
    echo "[setup] dependencies up to date"
fi

mkdir -p "$JARS"
for artifact in "${DELTA_ARTIFACTS[@]}"; do
    IFS=: read -r group name version <<< "$artifact"
    if [ ! -s "$JARS/$name-$version.jar" ]; then
        echo "[setup] fetching $artifact with Maven"
        mvn -q -B dependency:copy -Dartifact="$artifact" -DoutputDirectory="$JARS" \
            -Dmdep.overWriteIfNewer=true >/dev/null
    fi
done
bash infra/flink/build.sh  # the Flink load job jar in .cache/flink (issue 11)
echo "[setup] ready: venv $VENV, Delta jars in $JARS"
