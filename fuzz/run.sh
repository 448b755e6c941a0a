#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) each, with AddressSanitizer, on the nightly
# toolchain. Seeds come from corpus_seed/; the growing corpora live in corpus/ (not committed).
# Exits non-zero if any target finds a crash.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
for t in differential shapes npy arrow_zip; do
    mkdir -p "corpus/$t"
    cp -n corpus_seed/"$t"/* "corpus/$t/" 2>/dev/null || true
    echo "== fuzz $t for ${secs}s"
    cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 2>&1 \
        | grep -E "stat::|Done|ERROR|SUMMARY|panicked|crash-" || true
    # cargo fuzz exits non-zero on a crash; PIPESTATUS keeps that.
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz target $t failed"; exit 1; }
done
