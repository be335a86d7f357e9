#!/usr/bin/env bash
# `pnpm test`: makes sure the test servers are installed, builds every package once, then runs every
# package's tests through turbo in four lanes side by side (the machines have 2 cores, but most
# tests wait on leases, timeouts and real servers rather than compute), each one package at a time
# (each package starts its own servers on free ports; the server's files are split over two lanes).
# Prints one closing line with the totals over all packages.
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
    # Four lanes, balanced by measured durations (one package, or one part of the server's files, at
    # a time per lane). The four lanes side by side on a 2-core machine, 2026-11-27 23:00Z: the
    # server's fault files ~635 s (LEAF_TEST_SERVER_FILES=faults; apps/server/vitest.config.ts),
    # process and stop-paused-database ~200 s (=more), its other files ~770 s (=rest, residue's
    # failover test since cut from 136 s to 10 s when run alone), chaos ~615 s, segment-redis ~355 s,
    # registry-redis ~340 s, registry-zk ~255 s, redis-sequence ~205 s, registry-mysql ~135 s,
    # segment-mysql ~125 s, registry-postgres ~120 s, registry-etcd and testkit ~105 s,
    # segment-postgres ~70 s, registry-local ~60 s, client and core ~40 s, segment ~25 s, the
    # rest under 10 s each: about 1,000 to 1,100 s per lane. Most of their time is waiting on
    # leases, timeouts and real servers rather than compute, so a lane more shortens the run more
    # than it slows each test.
    lane_a=(--filter=@leaf/server --filter=@leaf/registry-mysql --filter=@leaf/client
      --filter=@leaf/core --filter=@leaf/segment --filter=@leaf/segment-postgres)
    lane_b=(--filter=@leaf/chaos --filter=@leaf/registry-zk --filter=@leaf/server)
    lane_d=(--filter=@leaf/server --filter=@leaf/redis-sequence --filter=@leaf/segment-mysql
      --filter=@leaf/registry-postgres)
    lane_c=()
    for f in "${lane_a[@]}" "${lane_b[@]}" "${lane_d[@]}"; do lane_c+=("--filter=!${f#--filter=}"); done
    lane() { pnpm exec turbo run test --only --concurrency=1 --continue "$@"; }
    LEAF_TEST_SERVER_FILES=rest lane "${lane_a[@]}" 2>&1 | tee -a "$log.a" &
    pid_a=$!
    LEAF_TEST_SERVER_FILES=more lane "${lane_b[@]}" 2>&1 | tee -a "$log.b" &
    pid_b=$!
    lane "${lane_c[@]}" 2>&1 | tee -a "$log.c" &
    pid_c=$!
    LEAF_TEST_SERVER_FILES=faults lane "${lane_d[@]}" 2>&1 | tee -a "$log.d" &
    pid_d=$!
    wait "$pid_a"
    status_a=$?
    wait "$pid_b"
    status_b=$?
    wait "$pid_c"
    status_c=$?
    wait "$pid_d"
    status_d=$?
    cat "$log.a" "$log.b" "$log.c" "$log.d" >>"$log"
    rm -f "$log.a" "$log.b" "$log.c" "$log.d"
    status=$((status_a != 0 ? status_a : status_b != 0 ? status_b : status_c != 0 ? status_c : status_d))
  fi
fi
node scripts/test-summary.mjs "$log" "$status"
summary_status=$?
rm -f "$log"
[ "$status" -ne 0 ] && exit "$status"
exit "$summary_status"
