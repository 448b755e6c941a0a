#!/usr/bin/env bash
# selectjit-tract's CI: lints and Rust tests of the crate, then ONNX graphs built with onnx.helper
# and ONNX's own node test cases run by `selectjit-onnx` against tract alone, numpy and ONNX
# Runtime (a fresh venv with tests/../requirements-test.txt). Exits non-zero on any failure.
#
# tract is heavy to build, so the crate is not a default member of the workspace and is built
# here alone, in cargo's `dev` profile without debug info (CARGO_PROFILE_DEV_DEBUG=0: a cold
# build of tract in the dev profile takes ~4 min on two cores, a release one ~3 times that).
# Artifacts go to the workspace's target directory (CARGO_TARGET_DIR, default <repo>/target), so
# a second run rebuilds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR="$(cd "$CARGO_TARGET_DIR" && pwd)"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
python="${PYTHON:-python3}"
venv="$CARGO_TARGET_DIR/selectjit-tract-venv"
cd "$root"

# Lints and tests in one build (.ci/cargo-linted: the workspace's crates through clippy-driver
# with `-D warnings`), so the heavy dependencies compile once, not checked and then built.
t0=$(date +%s)
"$root/.ci/cargo-linted" test -p selectjit-tract
t2=$(date +%s)
echo "selectjit-tract: clippy, build and Rust tests in $((t2 - t0)) s"

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
t3=$(date +%s)
echo "selectjit-tract: venv and test requirements in $((t3 - t2)) s"
# The binary `cargo test` built for the command's tests.
"$venv/bin/python" "$here/tests/python/check_onnx.py" \
    --bin "$CARGO_TARGET_DIR/debug/selectjit-onnx" --cases "$root/benches/cases.json"
t4=$(date +%s)
echo "selectjit-tract: ONNX checks in $((t4 - t3)) s; ci.sh total $((t4 - t0)) s"
