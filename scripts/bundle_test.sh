#!/usr/bin/env bash
# GPU kit check: builds dist/weft-linux-x64.tar.gz (scripts/bundle_linux_x64.sh), checks
# its size (at most 60 MiB), unpacks it into an empty temporary folder outside the checkout
# (no node_modules there or in any folder above, no npm, no tsx: the kit's own Node, bundle,
# addon and Vulkan loader) and from there runs, on this host's adapters (CPU ones in CI):
#   ./weft --version
#   ./weft generate ...        (the bundled model, 8 tokens, --json)
#   ./weft serve               (waits for /health, checks /version, the web app, /generate)
#   scripts/gpu_bench.sh --quick --no-torch --budget-s 150   (the kit's benchmark prints its table)
# and stops the server. Exits non-zero on the first failure.
# WEFT_BUNDLE_SKIP_BUILD=1 tests the archive already in dist/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ARCHIVE=$PWD/dist/weft-linux-x64.tar.gz
VERSION=$(node -p "require('./package.json').version")

say() { printf 'bundle_test: %s\n' "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

if [[ ${WEFT_BUNDLE_SKIP_BUILD:-} != 1 ]]; then
  say "building"
  bash scripts/bundle_linux_x64.sh
fi
[[ -f $ARCHIVE ]] || fail "no $ARCHIVE"
size=$(stat -c %s "$ARCHIVE")
((size <= 60 * 1024 * 1024)) || fail "archive is $size bytes, over 60 MiB"
say "archive: $((size / 1024 / 1024)) MiB"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-bundle-test.XXXXXX")
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
tar -xzf "$ARCHIVE" -C "$TMP"
KIT=$TMP/weft-linux-x64
[[ -x $KIT/weft ]] || fail "no weft launcher in the archive"
# Nothing outside the kit may help: no node_modules beside it or above it.
d=$KIT
while [[ $d != / ]]; do
  d=$(dirname "$d")
  [[ ! -e $d/node_modules ]] || fail "$d/node_modules exists: the test would not prove the kit self-contained"
done
[[ ! -e $KIT/node_modules ]] || fail "the kit carries a top-level node_modules"
cd "$KIT"
# Only the kit's Node on PATH: a stray `node` of this host cannot stand in for it.
export PATH=/usr/bin:/bin

got=$(./weft --version)
[[ $got == "$VERSION" ]] || fail "--version printed '$got', want '$VERSION'"
say "--version: $got"

out=$(./weft generate --max-new-tokens 8 --json "Once upon a time" 2>"$TMP/generate.log") || { cat "$TMP/generate.log" >&2; fail "generate"; }
./bin/node -e '
  const r = JSON.parse(process.argv[1]);
  if (typeof r.text !== "string" || r.text.length === 0 || r.token_ids.length !== 8) { console.error("bad generate output", r); process.exit(1); }
' "$out" || fail "generate output: $out"
say "generate: $(./bin/node -p 'JSON.parse(process.argv[1]).text' "$out" | tr '\n' ' ')"

PORT=$(./bin/node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();})')
WEFT_MANAGEMENT_PORT=0 WEFT_OPENAI_PORT=0 WEFT_SAGEMAKER_PORT=0 WEFT_VERTEX_PORT=0 WEFT_HOST=127.0.0.1 \
  ./weft serve --port "$PORT" >"$TMP/serve.log" 2>&1 &
SERVER_PID=$!
BASE=http://127.0.0.1:$PORT
ok=
for _ in $(seq 1 240); do
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/serve.log" >&2; fail "serve exited"; }
  if curl -fsS "$BASE/health" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.5
done
[[ -n $ok ]] || { cat "$TMP/serve.log" >&2; fail "no 200 from /health within 120 s"; }
say "serve: /health 200 on port $PORT"
v=$(curl -fsS "$BASE/version")
./bin/node -e 'const v=JSON.parse(process.argv[1]); if (v.version !== process.argv[2]) { console.error(v); process.exit(1); }' "$v" "$VERSION" || fail "/version: $v"
page=$(curl -fsS "$BASE/")
[[ $page == *'<html'* || $page == *'<!doctype html'* || $page == *'<!DOCTYPE html'* ]] || fail "/ did not serve the web app"
gen=$(curl -fsS -H 'content-type: application/json' -d '{"text":"Once upon a time","max_new_tokens":4}' "$BASE/generate") || { cat "$TMP/serve.log" >&2; fail "/generate"; }
./bin/node -e 'const g=JSON.parse(process.argv[1]); if (typeof g.text !== "string" || g.text.length === 0) { console.error(g); process.exit(1); }' "$gen" || fail "/generate: $gen"
say "serve: /version, / (web app) and /generate answered: $(./bin/node -p 'JSON.parse(process.argv[1]).text' "$gen" | tr '\n' ' ')"
# The reader's worker threads, bundled beside it: a JSON Schema compiles on the compile worker,
# a long text tokenizes on the tokenizer worker.
js=$(curl -fsS -H 'content-type: application/json' -d '{"text":"Once","max_new_tokens":24,"json_schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}}' "$BASE/generate") || { cat "$TMP/serve.log" >&2; fail "/generate with json_schema"; }
./bin/node -e 'const v=JSON.parse(JSON.parse(process.argv[1]).text); if (typeof v.ok !== "boolean") process.exit(1);' "$js" || fail "/generate with json_schema: $js"
rid=$(curl -fsS "$BASE/status" | ./bin/node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>{const r=Object.values(JSON.parse(s).groups).flat().find((x)=>x.type==="generate");console.log(r.reader_id)})') || fail "/status"
long=$(./bin/node -e 'console.log(JSON.stringify({text:"Once upon a time there was a cat. ".repeat(200)}))')
tk=$(curl -fsS -H 'content-type: application/json' -d "$long" "$BASE/tokenize/$rid") || { cat "$TMP/serve.log" >&2; fail "/tokenize (tokenizer worker)"; }
./bin/node -e 'const t=JSON.parse(process.argv[1]).tokens; if (!Array.isArray(t) || t.length < 1000) process.exit(1);' "$tk" || fail "/tokenize: ${tk:0:200}"
say "serve: json_schema on the compile worker and a 6.8 KB /tokenize on the tokenizer worker answered"
kill "$SERVER_PID"
for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVER_PID" 2>/dev/null; then fail "serve did not stop on SIGTERM"; fi
SERVER_PID=

# The benchmark kit end to end on this host's adapter (stories260K, Weft rows only: the
# PyTorch side is checked by the GPU run and scripts/torch_bench.py's own use).
bench=$(bash scripts/gpu_bench.sh --quick --no-torch --budget-s 150 --workdir "$TMP/bench" 2>"$TMP/bench.log") || { cat "$TMP/bench.log" >&2; fail "gpu_bench.sh --quick"; }
printf '%s\n' "$bench"
[[ $bench == *'| stories260K | Weft f16 '* && $bench == *'roofline 16-bit'* ]] || { cat "$TMP/bench.log" >&2; fail "gpu_bench.sh printed no Weft and roofline rows"; }
say "PASS (weft $VERSION from $(basename "$ARCHIVE"))"
