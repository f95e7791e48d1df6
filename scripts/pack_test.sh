#!/usr/bin/env bash
# Pack-and-install check: what a user gets from the registry. Builds the
# package (dist/ + web/dist), packs it with `npm pack`, installs the tarball in
# an empty temporary folder with no dev dependencies (so neither tsx nor the
# checkout's node_modules can help), then from there runs
#   npx @weft-ai/weft --version
#   npx @weft-ai/weft generate ...      (the bundled model)
#   npx @weft-ai/weft serve             (waits for /health, checks /version and the web app)
# and stops the server. Exits non-zero on the first failure.
# WEFT_PACK_SKIP_BUILD=1 packs the dist/ and web/dist already built.
# WEFT_PACK_NODE=22 runs the installed package under that Node major, fetched as
# the npm package `node@22` (CI does this: the package declares engines >=22 while
# the build machine's own Node may be older).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
NAME=$(node -p "require('./package.json').name")
VERSION=$(node -p "require('./package.json').version")

say() { printf 'pack_test: %s\n' "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

if [[ ${WEFT_PACK_SKIP_BUILD:-} != 1 ]]; then
  say "building"
  npm run build >/dev/null
fi
[[ -f dist/server/cli.js ]] || fail "dist/server/cli.js missing (npm run build)"
[[ -f web/dist/index.html ]] || fail "web/dist/index.html missing (npm run build)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-pack.XXXXXX")
# The server runs in its own process group (setsid): npx does not pass signals on to the
# node process it starts, so signals go to the whole group, and the group must be gone.
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 -- "-$SERVER_PID" 2>/dev/null; then
    kill -- "-$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 -- "-$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

say "npm pack"
TARBALL=$(npm pack --silent --pack-destination "$TMP" | tail -n 1)
[[ -f $TMP/$TARBALL ]] || fail "npm pack wrote no tarball"
# Nothing of the checkout's sources or tests travels: the built code only.
if tar -tzf "$TMP/$TARBALL" | grep -Eq '^package/(server|core|test)/'; then fail "tarball carries TypeScript sources"; fi

if [[ -n ${WEFT_PACK_NODE:-} ]]; then
  say "fetching node@$WEFT_PACK_NODE"
  npm install --no-audit --no-fund --prefix "$TMP/node" "node@$WEFT_PACK_NODE" >"$TMP/node.log" 2>&1 || {
    cat "$TMP/node.log" >&2
    fail "npm install node@$WEFT_PACK_NODE"
  }
  export PATH="$TMP/node/node_modules/.bin:$PATH"
  [[ $(node -p 'process.versions.node.split(".")[0]') == "$WEFT_PACK_NODE" ]] || fail "node@$WEFT_PACK_NODE is not the node on PATH"
  say "running the installed package on node $(node --version)"
fi

APP=$TMP/app
mkdir -p "$APP"
cd "$APP"
printf '{"name":"weft-pack-test","private":true,"type":"module"}\n' >package.json
say "installing $TARBALL with --omit=dev"
ONNXRUNTIME_NODE_INSTALL=skip npm install --omit=dev --no-audit --no-fund --prefer-offline "$TMP/$TARBALL" >"$TMP/install.log" 2>&1 || {
  cat "$TMP/install.log" >&2
  fail "npm install of the tarball"
}
[[ ! -e node_modules/tsx ]] || fail "tsx was installed: it must not be needed at run time"

got=$(npx --no-install "$NAME" --version)
[[ $got == "$VERSION" ]] || fail "--version printed '$got', want '$VERSION'"
say "--version: $got"

out=$(npx --no-install "$NAME" generate --max-new-tokens 8 --json "Once upon a time")
node -e '
  const r = JSON.parse(process.argv[1]);
  if (typeof r.text !== "string" || r.text.length === 0 || r.token_ids.length !== 8) { console.error("bad generate output", r); process.exit(1); }
' "$out" || fail "generate"
say "generate: $(node -p 'JSON.parse(process.argv[1]).text' "$out" | tr '\n' ' ')"

PORT=$(node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();})')
# Only the inference port: the others (3001, 3002, 3003, 8080) may be taken on a shared host.
WEFT_MANAGEMENT_PORT=0 WEFT_OPENAI_PORT=0 WEFT_SAGEMAKER_PORT=0 WEFT_VERTEX_PORT=0 WEFT_HOST=127.0.0.1 \
  setsid npx --no-install "$NAME" serve --port "$PORT" >"$TMP/serve.log" 2>&1 &
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
node -e 'const v=JSON.parse(process.argv[1]); if (v.version !== process.argv[2]) { console.error(v); process.exit(1); }' "$v" "$VERSION" || fail "/version: $v"
page=$(curl -fsS "$BASE/")
[[ $page == *'<html'* || $page == *'<!doctype html'* || $page == *'<!DOCTYPE html'* ]] || fail "/ did not serve the web app"
gen=$(curl -fsS -H 'content-type: application/json' -d '{"text":"Once upon a time","max_new_tokens":4}' "$BASE/generate")
node -e 'const g=JSON.parse(process.argv[1]); if (typeof g.text !== "string") { console.error(g); process.exit(1); }' "$gen" || fail "/generate: $gen"
say "serve: /version, / (web app) and /generate answered"
kill -- "-$SERVER_PID"
for _ in $(seq 1 100); do kill -0 -- "-$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 -- "-$SERVER_PID" 2>/dev/null; then fail "serve did not stop on SIGTERM"; fi
SERVER_PID=
say "PASS ($NAME@$VERSION from $TARBALL)"
