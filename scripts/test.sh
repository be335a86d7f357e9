#!/usr/bin/env bash
# `pnpm test`: makes sure the test servers are installed, builds every package once, then runs every
# package's tests through turbo in three lanes side by side (the machines have 2 cores, but most
# tests wait on leases, timeouts and real servers rather than compute), each one package at a time
# (each package starts its own servers on free ports). Prints one closing line with the totals over all packages.
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
    # Three lanes, balanced by measured durations (one package at a time per lane; a fresh clone
    # on a 2-core machine, 2026-11-26: server ~700 s, chaos ~525 s, segment-redis ~330 s,
    # registry-redis ~300 s, registry-zk ~210 s, redis-sequence ~170 s, registry-mysql ~130 s, the
    # rest under 90 s each). Most of their time is waiting on leases, timeouts and real servers, so
    # a third lane shortens the run more than it slows each test.
    lane_a=(--filter=@leaf/server --filter=@leaf/registry-mysql --filter=@leaf/registry-local
      --filter=@leaf/segment-postgres)
    lane_b=(--filter=@leaf/chaos --filter=@leaf/registry-zk --filter=@leaf/testkit --filter=@leaf/client
      --filter=@leaf/redis-sequence)
    lane_c=()
    for f in "${lane_a[@]}" "${lane_b[@]}"; do lane_c+=("--filter=!${f#--filter=}"); done
    pnpm exec turbo run test --only --concurrency=1 --continue "${lane_a[@]}" 2>&1 | tee -a "$log.a" &
    pid_a=$!
    pnpm exec turbo run test --only --concurrency=1 --continue "${lane_b[@]}" 2>&1 | tee -a "$log.b" &
    pid_b=$!
    pnpm exec turbo run test --only --concurrency=1 --continue "${lane_c[@]}" 2>&1 | tee -a "$log.c" &
    pid_c=$!
    wait "$pid_a"
    status_a=$?
    wait "$pid_b"
    status_b=$?
    wait "$pid_c"
    status_c=$?
    cat "$log.a" "$log.b" "$log.c" >>"$log"
    rm -f "$log.a" "$log.b" "$log.c"
    status=$((status_a != 0 ? status_a : status_b != 0 ? status_b : status_c))
  fi
fi
node scripts/test-summary.mjs "$log" "$status"
summary_status=$?
rm -f "$log"
[ "$status" -ne 0 ] && exit "$status"
exit "$summary_status"
