#!/usr/bin/env bash
# selectjit-datafusion's CI: lints and Rust tests of the crate (the SQL files against DataFusion
# alone, the command line), then the same queries on DuckDB as an independent oracle (a fresh
# venv with requirements-test.txt). Exits non-zero on any failure.
#
# DataFusion is heavy to build, so the crate is not a default member of the workspace and is
# built here alone, once, in cargo's `dev` profile without debug info.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR="$(cd "$CARGO_TARGET_DIR" && pwd)"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
python="${PYTHON:-python3}"
venv="$CARGO_TARGET_DIR/selectjit-datafusion-venv"
dump="$CARGO_TARGET_DIR/selectjit-datafusion-sql"
cd "$root"

# Lints and tests in one build (.ci/cargo-linted: the workspace's crates through clippy-driver
# with `-D warnings`), so the heavy dependencies compile once, not checked and then built.
t0=$(date +%s)
rm -rf "$dump"
SELECTJIT_SQL_DUMP="$dump" "$root/.ci/cargo-linted" test -p selectjit-datafusion
t2=$(date +%s)
echo "selectjit-datafusion: clippy, build and Rust tests in $((t2 - t0)) s"

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
"$venv/bin/python" "$here/tests/duckdb_check.py" "$dump"
t3=$(date +%s)
echo "selectjit-datafusion: DuckDB check in $((t3 - t2)) s; ci.sh total $((t3 - t0)) s"
