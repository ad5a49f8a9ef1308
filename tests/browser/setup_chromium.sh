#!/usr/bin/env bash
# The console's browser tests drive Debian's chromium headless through chromium-driver
# (selenium). Install both from the Debian package index when missing (needs root, as the
# reference build's Java packages do). Idempotent: nothing to do once both commands exist.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup_chromium: need root for apt-get install chromium chromium-driver" >&2
  exit 2
fi
echo "setup_chromium: installing chromium and chromium-driver" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
command -v chromium >/dev/null && command -v chromedriver >/dev/null
