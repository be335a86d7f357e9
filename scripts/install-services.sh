#!/usr/bin/env bash
# Installs the servers the test kit runs (MariaDB, PostgreSQL, Redis, ZooKeeper, etcd) from Debian's
# packages, Chromium for the server's browser test, wrk and HAProxy for the server's stop tests
# (a load generator, and a load balancer checking readiness), and nginx for its caching-proxy test.
# Needs root and apt-get; takes about 25 s. The packages' own services (and PostgreSQL's own
# cluster) are not used: the test kit starts private instances on free loopback ports, PostgreSQL
# as the package's unprivileged "postgres" user when run as root.
set -euo pipefail
if [ "$(id -u)" != "0" ]; then
  echo "install-services: must run as root (try: sudo bash scripts/install-services.sh)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-services: apt-get not found; install MariaDB, PostgreSQL, Redis, ZooKeeper (Java) and etcd by hand" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q mariadb-server postgresql redis-server zookeeper etcd-server chromium faketime gcc libc6-dev wrk haproxy nginx-light
