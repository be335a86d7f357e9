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
    # on a 2-core machine, 2026-11-27: server ~770 s (+45 s of tests added since), chaos ~520 s,
    # segment-redis ~340 s, registry-redis ~315 s, registry-zk ~240 s, redis-sequence ~180 s,
    # registry-mysql ~155 s, registry-postgres ~125 s, segment-postgres and segment-mysql ~100 s,
    # testkit ~75 s, registry-etcd ~65 s, the rest under 35 s each): about 1,050 s per lane. Most of their time is waiting on leases, timeouts and real servers, so
    # a third lane shortens the run more than it slows each test.
    lane_a=(--filter=@leaf/server --filter=@leaf/registry-mysql --filter=@leaf/client
      --filter=@leaf/core --filter=@leaf/segment)
    lane_b=(--filter=@leaf/chaos --filter=@leaf/registry-zk --filter=@leaf/redis-sequence
      --filter=@leaf/segment-postgres)
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
