#!/usr/bin/env bash
# `pnpm test`: makes sure the test servers are installed, builds every package once, then runs every
# package's tests through turbo in two lanes side by side (the machines have 2 cores, and most tests
# wait on leases, timeouts and real servers rather than compute): the server and the fault suite in
# one, the libraries in the other, each one package at a time (each package starts its own servers
# on free ports). Prints one closing line with the totals over all packages.
# With arguments (`pnpm test -- --filter=@leaf/core`), they go to one turbo run, one package at a time.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-services.sh || exit 1
log=$(mktemp -t leaf-test-XXXXXX.log)
if [ "$#" -gt 0 ]; then
  pnpm exec turbo run test --concurrency=1 --continue "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
else
  # Built once before the lanes start: a lane never rebuilds (--only) while the other reads dist/.
  pnpm exec turbo run build --output-logs=errors-only 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  if [ "$status" -eq 0 ]; then
    # The lanes were balanced by measured durations (one package at a time on a 2-core machine:
    # server ~33% and chaos ~19% of the total, the libraries together ~48%).
    lane_a=(--filter=@leaf/server --filter=@leaf/chaos)
    lane_b=(--filter='!@leaf/server' --filter='!@leaf/chaos')
    pnpm exec turbo run test --only --concurrency=1 --continue "${lane_a[@]}" 2>&1 | tee -a "$log.a" &
    pid_a=$!
    pnpm exec turbo run test --only --concurrency=1 --continue "${lane_b[@]}" 2>&1 | tee -a "$log.b" &
    pid_b=$!
    wait "$pid_a"
    status_a=$?
    wait "$pid_b"
    status_b=$?
    cat "$log.a" "$log.b" >>"$log"
    rm -f "$log.a" "$log.b"
    status=$((status_a != 0 ? status_a : status_b))
  fi
fi
node scripts/test-summary.mjs "$log" "$status"
summary_status=$?
rm -f "$log"
[ "$status" -ne 0 ] && exit "$status"
exit "$summary_status"
