#!/usr/bin/env bash
# pack_deps.sh: packs what a GPU-only build (TROUPE_GPU_ONLY) needs from this machine's Debian
# packages into .gpu-deps.tar.xz at the repository root (git-ignored, ~2 MB): the headers of
# fmt, spdlog, nlohmann-json, GoogleTest / GoogleMock, PCRE2 and utf8proc, and the static
# libraries of PCRE2, utf8proc, GoogleTest and GoogleMock. The lent GPU machines have CUDA, a
# compiler, CMake and Ninja but none of these, and reach no package registry: the device call
# carries this file (carry: [".gpu-deps.tar.xz"]) and bench/gpu/check.sh unpacks it.
#   bash bench/gpu/pack_deps.sh          (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=/usr/lib/x86_64-linux-gnu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include" "$tmp/lib"
cp -r /usr/include/fmt /usr/include/spdlog /usr/include/nlohmann /usr/include/gtest \
  /usr/include/gmock /usr/include/utf8proc.h /usr/include/pcre2.h "$tmp/include/"
cp "$lib/libpcre2-8.a" "$lib/libutf8proc.a" "$lib/libgtest.a" "$lib/libgtest_main.a" \
  "$lib/libgmock.a" "$tmp/lib/"
tar -C "$tmp" -cJf .gpu-deps.tar.xz include lib
ls -la .gpu-deps.tar.xz
