#!/usr/bin/env bash
# Build llama.cpp's native server (llama-server) into the virtual environment's bin folder.
#
# The source is the llama.cpp tree vendored in the llama-cpp-python sdist (PyPI), so the
# server runs the same ggml kernels as the llama-cpp-python package the tests compare it
# with. Static build, CPU flags that run on these machines (a native build dies with
# "Illegal instruction"), server target only: ~6 min on 2 cores; skipped when present.
#
# Usage: scripts/build_llama_server.sh <venv> "<cmake CPU flags>"
set -euo pipefail
VENV=${1:-.venv}
FLAGS=${2:-}
VERSION=0.3.36
OUT="$VENV/bin/llama-server"
if [ -x "$OUT" ] && "$OUT" --version >/dev/null 2>&1; then
    exit 0
fi
CMAKE=$(command -v cmake || true)
if [ -z "$CMAKE" ]; then  # no system cmake: the PyPI one, in the venv
    "$VENV/bin/python" -m pip install --quiet cmake
    CMAKE="$VENV/bin/cmake"
fi
WORK="build/llama-server"
mkdir -p "$WORK"
SDIST="$WORK/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
    "$VENV/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$VERSION" -d "$WORK"
fi
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -d "$SRC" ] || tar -xzf "$SDIST" -C "$WORK"
# shellcheck disable=SC2086
"$CMAKE" -S "$SRC" -B "$WORK/cmake" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF $FLAGS >"$WORK/configure.log"
"$CMAKE" --build "$WORK/cmake" --target llama-server -j "$(nproc)" >"$WORK/build.log"
install -m 755 "$WORK/cmake/bin/llama-server" "$OUT"
"$OUT" --version
