#!/usr/bin/env bash
# Make sure a headless Chromium is installed for the HTML report's browser tests
# (tests/test_html_report.py). Idempotent: exits 0 at once when `chromium` is on PATH. As root on
# Debian/Ubuntu it installs Debian's `chromium` package with apt (measured here: 46 s for the
# install on a warm apt index, plus `apt-get update`). Not root and no chromium: says what to run,
# exits 1.
set -u

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: chromium not found; install it (Debian: sudo apt-get install -y chromium)" >&2
  exit 1
fi
echo "ensure-chromium: installing chromium"
started=$(date +%s)
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || {
  echo "ensure-chromium: apt-get install chromium failed" >&2
  exit 1
}
echo "ensure-chromium: installed in $(($(date +%s) - started)) s"
