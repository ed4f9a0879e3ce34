#!/usr/bin/env bash
# layering_test.sh: fails when a folder includes what its layer may not (DESIGN.md):
# runtime/ includes caf/, cuda_runtime, ucp/, nccl or boost/; kernels/, model/ or transport/
# include caf/. `--self-test` plants a bad include in a scratch tree and checks it is caught.
set -u
check() {
  local root=$1 bad=0 hits
  hits=$(grep -rnE '#include *[<"](caf/|cuda_runtime|cuda\.h|ucp/|nccl|boost/)' "$root/runtime" 2>/dev/null)
  if [ -n "$hits" ]; then echo "runtime/ includes a CAF, CUDA, UCX, NCCL or Boost header:"; echo "$hits"; bad=1; fi
  for d in kernels model transport; do
    [ -d "$root/$d" ] || continue
    hits=$(grep -rnE '#include *[<"]caf/' "$root/$d" 2>/dev/null)
    if [ -n "$hits" ]; then echo "$d/ includes CAF (only actors/ may):"; echo "$hits"; bad=1; fi
  done
  return $bad
}
if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/runtime" "$tmp/kernels" "$tmp/transport"
  echo '#include "runtime/dtype.hpp"' > "$tmp/runtime/ok.hpp"
  check "$tmp" >/dev/null || { echo "self-test: a clean tree was rejected"; exit 1; }
  for planted in "runtime/x.cpp:#include <caf/all.hpp>" "runtime/y.cpp:#include <boost/asio.hpp>" \
                 "runtime/z.cpp:#include <cuda_runtime.h>" "runtime/w.cpp:#include <ucp/api/ucp.h>" \
                 "runtime/v.cpp:#include <nccl.h>" "kernels/k.cpp:#include \"caf/actor.hpp\"" \
                 "transport/t.cpp:#include <caf/io/all.hpp>"; do
    f=${planted%%:*}; line=${planted#*:}
    echo "$line" > "$tmp/$f"
    if check "$tmp" >/dev/null; then echo "self-test: missed $line in $f"; exit 1; fi
    rm "$tmp/$f"
  done
  echo "self-test: every planted include was caught"
  exit 0
fi
check "${1:?usage: layering_test.sh ROOT | --self-test}" && echo "layering: ok"
