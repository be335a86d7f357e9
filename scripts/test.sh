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
    # a time per lane). The fresh-clone run of 28 Nov 00:06Z on a 2-core machine (about 21.5 min
    # with install and build, its first lane the longest at about 1,230 s): the server's fault files
    # ~690 s (LEAF_TEST_SERVER_FILES=faults; apps/server/vitest.config.ts), process and
    # stop-paused-database ~210 s (=more), pack and high-water ~120 s (=extra), its other files
    # ~780 s (=rest), chaos ~610 s, segment-redis ~370 s, registry-redis ~350 s, registry-zk
    # ~285 s, redis-sequence ~195 s, segment-mysql and registry-mysql ~150 s, testkit ~130 s,
    # registry-postgres ~120 s, registry-etcd ~90 s, segment-postgres ~70 s, registry-local,
    # client and core ~40 s, segment ~35 s, the rest under 10 s each: 1,100 to 1,160 s per lane.
    # Most of their time is waiting on leases, timeouts and real servers rather than compute, so a
    # lane more shortens the run more than it slows each test.
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
    # Every package the other lanes leave, then the server's "extra" files.
    {
      lane "${lane_c[@]}"
      status_c1=$?
      LEAF_TEST_SERVER_FILES=extra lane --filter=@leaf/server
      status_c2=$?
      exit $((status_c1 != 0 ? status_c1 : status_c2))
    } 2>&1 | tee -a "$log.c" &
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
