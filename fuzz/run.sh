#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) each, with AddressSanitizer, on the nightly
# toolchain. Seeds come from corpus_seed/; the growing corpora live in corpus/ (not committed).
# Exits non-zero if any target finds a crash.
#
# FUZZ_BUILD_FLAGS adds cargo-fuzz build options: CI's smoke uses `--dev` (no optimisation,
# debug assertions and AddressSanitizer still on), which builds in a fraction of the time of
# cargo-fuzz's default optimised build and runs each input more slowly.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
read -r -a build_flags <<< "${FUZZ_BUILD_FLAGS:-}"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
# Every target in one build: their dependencies are shared, and the final links run in parallel.
cargo +nightly fuzz build ${build_flags[@]+"${build_flags[@]}"}
for t in differential shapes npy arrow_zip; do
    mkdir -p "corpus/$t"
    cp -n corpus_seed/"$t"/* "corpus/$t/" 2>/dev/null || true
    echo "== fuzz $t for ${secs}s"
    cargo +nightly fuzz run ${build_flags[@]+"${build_flags[@]}"} "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 2>&1 \
        | grep -E "stat::|Done|ERROR|SUMMARY|panicked|crash-" || true
    # cargo fuzz exits non-zero on a crash; PIPESTATUS keeps that.
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz target $t failed"; exit 1; }
done
