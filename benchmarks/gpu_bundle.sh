#!/usr/bin/env bash
# A GPU machine that reaches no package index (Python 3.12, x86-64, CUDA torch already installed): fetch the
# packages robot_rl adds to such a machine here, carry them with the checkout, install and benchmark there.
#
#   bash benchmarks/gpu_bundle.sh fetch          # here: wheels into .whl/, EGL libraries into .gl/ (git-ignored)
#   bash benchmarks/gpu_bundle.sh run OUT [ARGS] # there: install into /tmp, then gpu_benchmark.py ARGS, JSON in OUT
#
# What the machine lacks and why each package: ../shared/DEVICE.md's recipe (torch stays the machine's own: the
# pinned one is not there, and torchrl/tensordict 0.14 run on torch 2.11). The run writes its results file and the
# benchmark's log under OUT; nothing is installed outside /tmp except the EGL libraries' files (dpkg -x to /).
set -euo pipefail
cd "$(dirname "$0")/.."

# pyproject.toml's pins where it has one (qpsolvers and daqp too: the IK is tested bit for bit against mink's).
WHEELS=(torchrl==0.14.1 tensordict==0.14.3 mujoco==4.0.0 mujoco-core==4.0.0 gymnasium==1.4.0
        farama-notifications mink==1.3.0 qpsolvers==4.13.0 daqp==0.11.0 glfw pyopengl orjson pyvers hoptorch
        importlib_metadata av)
GL_PACKAGES=(libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 libvulkan1)
NVIDIA_EGL_VENDOR=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json

fetch() {
    mkdir -p .whl .gl
    for wheel in "${WHEELS[@]}"; do
        python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .whl "$wheel"
    done
    (cd .gl && apt-get download "${GL_PACKAGES[@]}" 2>/dev/null)
    du -sh .whl .gl
}

run() {
    local out=$1
    shift
    mkdir -p "$out"
    if [ ! -f /tmp/robot_rl_installed ]; then  # /tmp lasts while the machine stays up: set up once
        for deb in .gl/*.deb; do dpkg -x "$deb" /; done
        ldconfig
        python3 -m pip install --quiet --no-index --no-deps --target /tmp/site .whl/*.whl
        python3 -m pip install --quiet --no-index --no-deps --no-build-isolation --target /tmp/proj .
        touch /tmp/robot_rl_installed
    fi
    export MUJOCO_GL=egl PYOPENGL_PLATFORM=egl PYTHONPATH=/tmp/proj:/tmp/site PATH=/tmp/proj/bin:$PATH
    [ -f "$NVIDIA_EGL_VENDOR" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$NVIDIA_EGL_VENDOR
    # From outside the checkout: its robot_rl/ folder would shadow the installed package (which maps envs/ and
    # pretrain/ into it); the benchmark scripts import each other from their own folder.
    local bench
    bench=$(pwd)/benchmarks
    (cd /tmp && python3 "$bench/gpu_benchmark.py" --out "$out/gpu_benchmark.json" "$@") 2>&1 | tee "$out/log.txt"
}

case "${1:-}" in
    fetch) fetch ;;
    run) shift; run "$@" ;;
    *) echo "usage: bash benchmarks/gpu_bundle.sh fetch | run OUT [gpu_benchmark options]" >&2; exit 2 ;;
esac
