#!/usr/bin/env bash
# Installs what the viewer's browser tests drive: Debian's Chromium and ChromeDriver (/usr/bin/chromium,
# /usr/bin/chromedriver). Does nothing when both are there. Needs root or sudo for apt-get.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-browser: need root or sudo to apt-get install chromium chromium-driver" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
/usr/bin/chromium --version >/dev/null
/usr/bin/chromedriver --version
