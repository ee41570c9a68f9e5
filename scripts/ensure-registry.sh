#!/usr/bin/env bash
# Make sure Docker's registry (Debian's `docker-registry` package: distribution 2.x) is installed
# for the registry tests (tests/test_registry.py, tests/test_ray_backend.py) and
# benchmarks/bench_registry.py. Idempotent: exits 0 at once when `docker-registry` is on PATH. As
# root on Debian/Ubuntu it installs the package with apt. The package's own service does not
# matter: the tests start the binary themselves with a config of their own (storage in a temporary
# folder, http on 127.0.0.1:<free port>). Not root and no registry: says what to run, exits 1.
set -u

if command -v docker-registry >/dev/null 2>&1 || [ -x /usr/bin/docker-registry ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-registry: docker-registry not found; install it (Debian: sudo apt-get install -y docker-registry)" >&2
  exit 1
fi
echo "ensure-registry: installing docker-registry"
started=$(date +%s)
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null || {
  echo "ensure-registry: apt-get install docker-registry failed" >&2
  exit 1
}
echo "ensure-registry: installed in $(($(date +%s) - started)) s"
