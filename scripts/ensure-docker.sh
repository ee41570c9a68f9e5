#!/usr/bin/env bash
# Make sure a Docker engine answers (`docker info`), installing and starting one when we may.
# Idempotent: exits 0 at once when an engine already runs. As root on Debian/Ubuntu it installs
# docker.io (and debootstrap, used to build the kernel image's base without a registry) with apt,
# then starts dockerd in the background (log: /tmp/pytest-super-dockerd.log) and waits up to 60 s.
# Not root and no engine: says what to run, exits 1.
set -u

LOG=/tmp/pytest-super-dockerd.log

engine_answers() { docker info >/dev/null 2>&1; }
is_root() { [ "$(id -u)" -eq 0 ]; }

install_packages() {
  # $@: Debian package names to install with apt-get
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-docker: apt-get not found; install $* with your package manager" >&2
    return 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

if is_root && ! command -v ip >/dev/null 2>&1; then
  echo "ensure-docker: installing iproute2 (the tests' second engine needs a bridge)"
  install_packages iproute2 || echo "ensure-docker: could not install iproute2" >&2
fi

if is_root && ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
  echo "ensure-docker: installing debootstrap"
  install_packages debootstrap || echo "ensure-docker: could not install debootstrap (offline image builds need it)" >&2
fi

if engine_answers; then
  exit 0
fi

if ! is_root; then
  cat >&2 <<MSG
ensure-docker: no Docker engine answers${DOCKER_HOST:+ at DOCKER_HOST=$DOCKER_HOST} and this is not root.
Start one, then run again:
  sudo scripts/ensure-docker.sh          # installs docker.io if needed and starts dockerd
  # or: sudo systemctl start docker  /  sudo dockerd &
  # or point DOCKER_HOST (or --super-docker-host) at an engine that runs.
MSG
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "ensure-docker: installing docker.io"
  if ! install_packages docker.io; then
    echo "ensure-docker: installing docker.io failed" >&2
    exit 1
  fi
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "ensure-docker: starting dockerd (log: $LOG)"
  setsid dockerd >"$LOG" 2>&1 < /dev/null &
fi

for _ in $(seq 1 60); do
  if engine_answers; then
    echo "ensure-docker: engine ready"
    exit 0
  fi
  sleep 1
done

echo "ensure-docker: dockerd did not answer within 60 s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 2>/dev/null
exit 1
