#!/usr/bin/env bash
# The Python package's CI: a fresh venv, the test requirements from PyPI, `pip install` of the
# package from this source tree (maturin builds the extension with cargo), then pytest (with
# dask.distributed clusters of real worker processes), the dask example and the cluster
# benchmark at a tiny scale.
# Exits non-zero on any failure, including a run that collects no test (pytest's exit 5).
#
# The extension is built with cargo's `dev` profile by default (SELECTJIT_PY_PROFILE=release to
# test the profile `pip install` uses): a cold dev build of the crate and its dependencies
# (Cranelift, PyO3, rust-numpy) takes ~1.5 min on two cores, a release one ~5 min, and the
# workspace's own release build cannot be reused for it (a lone build of this crate resolves
# other features for shared dependencies than the workspace's test build, which rebuilds
# Cranelift). The dev build also runs the library with its debug assertions and the Cranelift
# verifier on. Artifacts go to the workspace's target directory (CARGO_TARGET_DIR, default
# <repo>/target), so a second run rebuilds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR="$(cd "$CARGO_TARGET_DIR" && pwd)"   # absolute: the script changes directory
python="${PYTHON:-python3}"
profile="${SELECTJIT_PY_PROFILE:-dev}"
venv="$CARGO_TARGET_DIR/selectjit-py-venv"

t0=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
# The venv's tools (maturin, which pip's build hook runs by name) come first.
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
t1=$(date +%s)
echo "selectjit-py: venv and test requirements in $((t1 - t0)) s"

# --no-build-isolation: maturin is already in the venv (requirements-test.txt).
MATURIN_PEP517_ARGS="--profile $profile" "$venv/bin/python" -m pip install \
    --disable-pip-version-check --no-build-isolation --verbose "$here" \
    > "$CARGO_TARGET_DIR/selectjit-py-build.log" 2>&1 \
    || { tail -50 "$CARGO_TARGET_DIR/selectjit-py-build.log"; exit 1; }
t2=$(date +%s)
echo "selectjit-py: package built (cargo profile $profile) and installed in $((t2 - t1)) s"

# Tests run from the tests directory against the installed package.
cd "$here/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests"
t3=$(date +%s)
echo "selectjit-py: tests in $((t3 - t2)) s"
# The example scales out with dask's threaded scheduler, and on a dask.distributed LocalCluster
# of two worker processes (each reports the kernels it compiled per run of the graph).
"$venv/bin/python" "$here/examples/dask_where.py" --rows 2048 --cols 1024
"$venv/bin/python" "$here/examples/dask_where.py" --scheduler distributed --rows 2048 --cols 1024
# The cluster benchmark scaled down to a few MiB: that it runs and its results are exact.
"$venv/bin/python" "$here/bench/bench_dask.py" --tiny
t4=$(date +%s)
echo "selectjit-py: examples and the tiny cluster benchmark in $((t4 - t3)) s; ci.sh total $((t4 - t0)) s"
