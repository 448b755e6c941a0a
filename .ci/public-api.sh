#!/usr/bin/env bash
# The library's public API, as rustdoc (nightly, JSON output) sees it with the default features
# plus `ndarray`, compared with the reviewed listing in docs/public-api.txt: a change to the
# surface fails CI until the listing is updated (`--write`) in the same commit. `#[doc(hidden)]`
# items are listed too, marked as such (`--document-hidden-items`): they are nameable, so their
# growth is reviewed like the rest.
# `--missing-examples` lists public functions whose docs have no example (hidden ones need none).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/public-api"
RUSTDOCFLAGS="-Z unstable-options --output-format json --document-hidden-items" \
    cargo +nightly doc -q --no-deps -p selectjit --features ndarray
json="$CARGO_TARGET_DIR/doc/selectjit.json"
case "${1:-}" in
    --write) python3 .ci/public_api.py "$json" --write docs/public-api.txt ;;
    --missing-examples) python3 .ci/public_api.py "$json" --missing-examples ;;
    *) python3 .ci/public_api.py "$json" --check docs/public-api.txt ;;
esac
