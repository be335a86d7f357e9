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
    # a time per lane). The four lanes side by side on a 2-core machine, 2026-11-27: the server's
    # fault files ~525 s (LEAF_TEST_SERVER_FILES=faults; apps/server/vitest.config.ts) and its
    # other files ~725 s, chaos ~565 s, segment-redis ~360 s, registry-redis ~325 s, registry-zk
    # ~240 s, redis-sequence ~195 s, registry-mysql and segment-mysql ~135 s, registry-postgres
    # ~100 s, testkit ~85 s, segment-postgres ~70 s, registry-etcd ~65 s, registry-local, segment
    # and core ~35 s, the rest under 30 s each: 870 to 960 s per lane, 1,030 s in all with the
    # build (three lanes, fresh clones earlier that day: 1,400 to 1,500 s). Most of their time is
    # waiting on leases, timeouts and real servers rather than compute, so a lane more shortens the
    # run more than it slows each test.
    lane_a=(--filter=@leaf/server --filter=@leaf/registry-mysql --filter=@leaf/client
      --filter=@leaf/core --filter=@leaf/segment)
    lane_b=(--filter=@leaf/chaos --filter=@leaf/registry-zk --filter=@leaf/segment-postgres)
    lane_d=(--filter=@leaf/server --filter=@leaf/redis-sequence --filter=@leaf/segment-mysql
      --filter=@leaf/registry-postgres)
    lane_c=()
    for f in "${lane_a[@]}" "${lane_b[@]}" "${lane_d[@]}"; do lane_c+=("--filter=!${f#--filter=}"); done
    lane() { pnpm exec turbo run test --only --concurrency=1 --continue "$@"; }
    LEAF_TEST_SERVER_FILES=rest lane "${lane_a[@]}" 2>&1 | tee -a "$log.a" &
    pid_a=$!
    lane "${lane_b[@]}" 2>&1 | tee -a "$log.b" &
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
