#!/usr/bin/env bash
# build_llama_cpp.sh: builds llama.cpp's llama-server, llama-bench and llama-quantize (the
# engine we compare against; never part of Troupe) from the llama.cpp sources that
# llama-cpp-python's PyPI sdist vendors, into DIR/build-ISA. ISA: native (-march=native, as a user builds it) or avx2 (AVX2 +
# FMA + F16C only: llama.cpp's kernels of an AVX2-only machine, to run on any x86 CPU) or
# native-noamx (native without AMX: 0.3.36's AMX kernels stopped on an undefined-opcode trap at
# their first tileloadd on an Intel Xeon VM where Troupe's AMX tiles run, 2026-12-03).
#   [TARGETS="llama-bench ..."] bash bench/build_llama_cpp.sh [DIR=/tmp/llama-cpp] [ISA=native] [VERSION=0.3.36]
set -euo pipefail
DIR=${1:-/tmp/llama-cpp}
ISA=${2:-native}
VERSION=${3:-0.3.36}
mkdir -p "$DIR"
src="$DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [ ! -d "$src" ]; then
  python3 -m pip download --no-binary :all: --no-deps -d "$DIR" "llama-cpp-python==$VERSION"
  tar xzf "$DIR/llama_cpp_python-$VERSION.tar.gz" -C "$DIR"
fi
case "$ISA" in
native) flags=(-DGGML_NATIVE=ON) ;;
native-noamx) flags=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                     "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16") ;;
avx2) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
             -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF
             -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
*) echo "ISA is native, native-noamx or avx2" >&2; exit 2 ;;
esac
cmake -S "$src" -B "$DIR/build-$ISA" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CCACHE=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF "${flags[@]}" > /dev/null
cmake --build "$DIR/build-$ISA" -j "$(nproc)" --target ${TARGETS:-llama-server llama-bench llama-quantize}
ls -l "$DIR/build-$ISA/bin/"llama-*
