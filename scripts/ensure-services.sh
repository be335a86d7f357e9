#!/usr/bin/env bash
# Runs before the tests: checks that the binaries the test kit starts are here, and installs them
# (scripts/install-services.sh) when it can. With LEAF_TEST_* set for a service, that one is skipped.
set -uo pipefail
missing=()
if [ -z "${LEAF_TEST_MYSQL_URL:-}" ]; then
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=("mariadb-server")
fi
if [ -z "${LEAF_TEST_REDIS_URL:-}" ]; then
  command -v redis-server >/dev/null 2>&1 || missing+=("redis-server")
fi
if [ -z "${LEAF_TEST_ZK:-}" ]; then
  { [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; } || missing+=("zookeeper")
fi
command -v etcd >/dev/null 2>&1 || missing+=("etcd-server")
if [ -z "${LEAF_TEST_PG_URL:-}" ]; then
  compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=("postgresql")
fi
[ -x /usr/bin/chromium ] || missing+=("chromium")
command -v faketime >/dev/null 2>&1 || missing+=("faketime")
# The server's stop tests measure a SIGTERM under load with wrk, directly and behind HAProxy.
command -v wrk >/dev/null 2>&1 || missing+=("wrk")
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=("haproxy")
# and its caching test puts nginx's proxy_cache in front of a server.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=("nginx-light")
# redis-sequence's clock test builds a small preload library (libfaketime deadlocks with jemalloc).
command -v cc >/dev/null 2>&1 || missing+=("gcc")
[ ${#missing[@]} -eq 0 ] && exit 0
echo "ensure-services: missing ${missing[*]}; installing from Debian's packages" >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  exec bash "$(dirname "$0")/install-services.sh"
fi
cat >&2 <<MSG
ensure-services: cannot install ${missing[*]} here (needs root and apt-get).
Install them yourself, for example on Debian or Ubuntu:
  sudo apt-get update && sudo apt-get install mariadb-server redis-server zookeeper etcd-server postgresql chromium faketime gcc libc6-dev wrk haproxy nginx-light
or point the tests at running servers with LEAF_TEST_MYSQL_URL, LEAF_TEST_REDIS_URL, LEAF_TEST_PG_URL and LEAF_TEST_ZK.
MSG
exit 1
