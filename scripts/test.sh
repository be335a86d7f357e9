#!/usr/bin/env bash
# `pnpm test`: makes sure the test servers are installed while it builds every package once, then
# runs every package's tests through turbo in four lanes side by side (the machines have 2 cores,
# but most tests wait on leases, timeouts and real servers rather than compute), each one package at
# a time (each package starts its own servers on free ports; the server's files are split over the
# four lanes).
# Prints one closing line with the totals over all packages.
# With arguments (`pnpm test -- --filter=@leaf/core`), they go to one turbo run, one package at a time.
set -uo pipefail
cd "$(dirname "$0")/.."
# Every build of this run without declaration files (tsup.config.ts): the tests run the
# JavaScript, and `pnpm typecheck` and `pnpm lint` build the declarations. Exported, so that a test
# that runs a build itself (`pnpm start` in apps/server's start-script test) gets turbo's cached
# build of this run instead of rebuilding dist/ while the other lanes read it. Not a LEAF_* name:
# the server reports every LEAF_* variable that no key reads, and `--check` fails on one.
export BUILD_DECLARATIONS=0
log=$(mktemp -t leaf-test-XXXXXX.log)
# The test servers are checked (and on a fresh machine installed from Debian's packages, mostly
# downloads) while the packages build: neither needs the other.
bash scripts/ensure-services.sh >"$log.services" 2>&1 &
pid_services=$!
services() {
  wait "$pid_services"
  local services_status=$?
  cat "$log.services"
  echo "test: the test servers checked ${SECONDS} s after the start"
  rm -f "$log.services"
  if [ "$services_status" -ne 0 ]; then
    rm -f "$log"
    exit 1
  fi
}
if [ "$#" -gt 0 ]; then
  services
  pnpm exec turbo run test --concurrency=1 --continue "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
else
  # Built once before the lanes start: a lane never rebuilds (--only) while the other reads dist/.
  pnpm exec turbo run build --output-logs=errors-only 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  services
  if [ "$status" -eq 0 ]; then
    # Four lanes, balanced by measured durations (one package, or one part of the server's files, at
    # a time per lane). The fresh-clone CI run of 28 Nov 03:15Z on a 2-core machine (about 25.5 min
    # with install and build; the server's "rest" files two at a time then, which starved two
    # tests, so one at a time again): the server's fault files ~830 s (LEAF_TEST_SERVER_FILES=faults;
    # apps/server/vitest.config.ts), process and stop-paused-database ~190 s (=more), pack and
    # high-water ~235 s (=extra), its other files ~700 s two at a time (~900 s one at a time,
    # estimated from a run of 02:14Z), chaos ~680 s, segment-redis ~405 s, registry-redis ~365 s,
    # registry-zk ~315 s, redis-sequence ~190 s, registry-mysql ~170 s, testkit ~165 s,
    # segment-postgres ~125 s, registry-etcd ~120 s, registry-postgres ~115 s, segment-mysql
    # ~100 s, registry-local ~65 s, client ~55 s, core ~55 s, segment ~25 s, the rest under 10 s
    # each. The machine's two cores are the limit with four lanes: a test waits on leases and real
    # servers, but the servers and the load compete for the cores, so every test slows as lanes are
    # added; the lanes are about 1,230 to 1,330 s each by these figures.
    lane_a=(--filter=@leaf/server --filter=@leaf/registry-mysql --filter=@leaf/registry-local
      --filter=@leaf/core --filter=@leaf/segment --filter=@leaf/client)
    lane_b=(--filter=@leaf/chaos --filter=@leaf/registry-zk --filter=@leaf/server
      --filter=@leaf/registry-etcd)
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
