#!/usr/bin/env bash
# setup.sh: installs every system package Troupe builds and tests with (one apt-get line).
# Safe to run twice: apt-get skips what is already there. Needs root (or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
pkgs="cmake ninja-build ccache g++ pkg-config libcaf-dev libssl-dev libucx-dev ucx-utils libboost-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libxxhash-dev libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev python3 python3-venv curl"
missing=$(dpkg-query -W -f='${db:Status-Status} ${Package}\n' $pkgs 2>/dev/null | awk '$1!="installed"{print $2}'; for p in $pkgs; do dpkg-query -W "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$(echo "$missing" | tr -d '[:space:]')" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $pkgs
else
  echo "setup: all system packages present"
fi
