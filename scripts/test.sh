#!/usr/bin/env bash
# `pnpm test`: makes sure the test servers are installed, runs every package's tests through turbo
# (one package at a time: each starts its own servers, and the machines have 2 cores), then prints
# one closing line with the totals over all packages.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-services.sh || exit 1
log=$(mktemp -t leaf-test-XXXXXX.log)
pnpm exec turbo run test --concurrency=1 --continue "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
node scripts/test-summary.mjs "$log" "$status"
summary_status=$?
rm -f "$log"
[ "$status" -ne 0 ] && exit "$status"
exit "$summary_status"
