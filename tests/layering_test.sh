#!/usr/bin/env bash
# layering_test.sh: fails when a folder includes what its layer may not (DESIGN.md). Project
# includes run one way: each folder lists the folders it may include (itself always), so a
# cycle or an include back up the stack is caught; and only actors/ includes CAF, only
# kernels/cuda includes CUDA headers, only transport/ includes Boost, no folder below
# actors/ includes UCX or NCCL. `--self-test` plants bad includes in a scratch tree and
# checks each is caught.
set -u
# folder: the project folders it may include
allowed() {
  case $1 in
  core) echo "" ;;
  formats) echo "core" ;;
  text) echo "core formats" ;;
  arch) echo "core formats text graph kernels" ;;
  graph) echo "core kernels" ;;
  engine) echo "core" ;;
  kernels) echo "core" ;;
  exec) echo "core formats text arch graph kernels" ;;
  model) echo "core formats text arch graph kernels exec" ;;
  transport) echo "core" ;;
  actors) echo "core formats text arch graph engine kernels exec model transport" ;;
  *) echo "-" ;;
  esac
}
layers="core formats text kernels graph arch engine exec model transport actors"
check() {
  local root=$1 bad=0 hits d inc
  for d in $layers; do
    [ -d "$root/$d" ] || continue
    for inc in $(grep -rhoE '#include "[a-z_]+/' "$root/$d" 2>/dev/null | sed 's/#include "//; s/\///' | sort -u); do
      [ "$inc" = "$d" ] && continue
      case " $layers " in *" $inc "*) ;; *) continue ;; esac # not a project folder (caf/, ...)
      case " $(allowed "$d") " in *" $inc "*) ;; *)
        echo "$d/ may not include $inc/:"
        grep -rnE "#include \"$inc/" "$root/$d"
        bad=1 ;;
      esac
    done
    if [ "$d" != actors ]; then
      hits=$(grep -rnE '#include *[<"]caf/' "$root/$d" 2>/dev/null)
      if [ -n "$hits" ]; then echo "$d/ includes CAF (only actors/ may):"; echo "$hits"; bad=1; fi
    fi
    if [ "$d" != transport ] && [ "$d" != actors ]; then
      hits=$(grep -rnE '#include *[<"](boost/|ucp/|nccl)' "$root/$d" 2>/dev/null)
      if [ -n "$hits" ]; then echo "$d/ includes Boost, UCX or NCCL:"; echo "$hits"; bad=1; fi
    fi
    hits=$(grep -rnE '#include *[<"](cuda_runtime|cuda\.h|cublas|nvrtc)' "$root/$d" 2>/dev/null | grep -v "^$root/kernels/cuda/")
    if [ -n "$hits" ]; then echo "$d/ includes a CUDA header (only kernels/cuda may):"; echo "$hits"; bad=1; fi
  done
  return $bad
}
if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/core" "$tmp/formats" "$tmp/kernels/cuda" "$tmp/transport" "$tmp/arch" "$tmp/engine"
  echo '#include "core/dtype.hpp"' > "$tmp/formats/ok.hpp"
  echo '#include <cuda_runtime.h>' > "$tmp/kernels/cuda/ok.cu"
  echo '#include <boost/asio.hpp>' > "$tmp/transport/ok.cpp"
  check "$tmp" >/dev/null || { echo "self-test: a clean tree was rejected"; exit 1; }
  for planted in "core/x.cpp:#include <caf/all.hpp>" "core/y.cpp:#include <boost/asio.hpp>" \
                 "core/z.cpp:#include <cuda_runtime.h>" "formats/w.cpp:#include <ucp/api/ucp.h>" \
                 "engine/v.cpp:#include <nccl.h>" "kernels/k.cpp:#include \"caf/actor.hpp\"" \
                 "transport/t.cpp:#include <caf/io/all.hpp>" "core/u.cpp:#include \"formats/gguf.hpp\"" \
                 "formats/c.cpp:#include \"arch/model_config.hpp\"" "engine/e.cpp:#include \"text/tokenizer.hpp\"" \
                 "kernels/r.cpp:#include \"arch/rope.hpp\""; do
    f=${planted%%:*}; line=${planted#*:}
    echo "$line" > "$tmp/$f"
    if check "$tmp" >/dev/null; then echo "self-test: missed $line in $f"; exit 1; fi
    rm "$tmp/$f"
  done
  echo "self-test: every planted include was caught"
  exit 0
fi
check "${1:?usage: layering_test.sh ROOT | --self-test}" && echo "layering: ok"
