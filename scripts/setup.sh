#!/usr/bin/env bash
# Sets up a fresh Debian machine for Weft (and is what CI runs first): the
# system libraries WebGPU needs on hosts without a GPU — Mesa EGL/GLES for
# Dawn's OpenGL ES backend, the Vulkan loader + lavapipe for Deno, Debian
# chromium for its SwiftShader ICD and the browser tests, nats-server (the
# broker the multi-machine tests start), postgresql (the shared document
# store those tests start in a temporary directory; Debian's has no
# pgvector, and the store uses plain float4 arrays there) — then the npm
# dependencies. Idempotent: skips what is present.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

# python3-torch: scripts/make_realshape.py (the real-shape goldens of the slow test group).
# binutils: strip, for the GPU kit archive (scripts/bundle_linux_x64.sh).
PACKAGES=(libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri libvulkan1 mesa-vulkan-drivers chromium ca-certificates nats-server postgresql python3-torch binutils)
missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == 'install ok installed' ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "setup: missing system packages; run as root or install them: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  for p in "${missing[@]}"; do
    # (captured, not piped into grep -q: with pipefail an early grep exit fails the pipe)
    policy=$(apt-cache policy "$p")
    if [[ $policy != *'Candidate: '[0-9]* ]]; then
      echo "setup: apt has no installable package named $p" >&2
      exit 1
    fi
  done
  apt-get install -y -q -o Dpkg::Use-Pty=0 "${missing[@]}" </dev/null
fi

# onnxruntime-node's install script would download a binary; nothing here uses it.
export ONNXRUNTIME_NODE_INSTALL=skip
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  if ! npm ci --no-audit --no-fund </dev/null; then
    # npm ci refuses a lock file missing other platforms' optional packages
    # (@deno/darwin-*, ...), which this registry does not carry; npm install
    # still installs the locked versions.
    echo "setup: npm ci failed; falling back to npm install" >&2
    npm install --no-audit --no-fund </dev/null
  fi
fi
