#!/usr/bin/env bash
# Makes sure the viewer's browser tests have a Chromium and a ChromeDriver of the same version, and says which.
#   - $TRACTKV_CHROMIUM / $TRACTKV_CHROMEDRIVER, when set, name them (any system: a Chromium or Chrome and the
#     chromedriver of its version); nothing is installed.
#   - otherwise Debian's chromium + chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver), apt-installed
#     when missing (needs root or sudo).
set -euo pipefail

say() { echo "install-browser: $*" >&2; }

# Debian's /usr/bin/chromium is a shell launcher whose own checks print noise such as
# "[: 25276063744: unexpected operator" on stderr; only the version line matters here.
version() { "$1" --version 2>/dev/null | head -n 1; }

chromium=${TRACTKV_CHROMIUM:-}
driver=${TRACTKV_CHROMEDRIVER:-}
if [ -n "$chromium" ] || [ -n "$driver" ]; then
    for path in "$chromium" "$driver"; do
        if [ -z "$path" ] || [ ! -x "$path" ]; then
            say "set both TRACTKV_CHROMIUM and TRACTKV_CHROMEDRIVER to executables (got '${chromium}' and '${driver}')"
            exit 1
        fi
    done
    say "using $(version "$chromium") ($chromium) and $(version "$driver") ($driver) from the environment"
    exit 0
fi

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    say "already installed: $(version /usr/bin/chromium), $(version /usr/bin/chromedriver)"
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    say "need root or sudo to apt-get install chromium chromium-driver;" \
        "or set TRACTKV_CHROMIUM and TRACTKV_CHROMEDRIVER to a Chromium and its driver"
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
say "apt-get install chromium chromium-driver (for the viewer's browser tests; about 300 MB, a minute or two)"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
say "installed: $(version /usr/bin/chromium), $(version /usr/bin/chromedriver)"
