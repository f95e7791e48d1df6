#!/usr/bin/env bash
# Checks the container images' recipes (Dockerfile, Dockerfile.cpu) without
# Docker, which CI machines do not have. For each Dockerfile:
#   - the base image is node:<major> with the major package.json `engines` asks for;
#   - every `apt-get install` package exists for this Debian (apt-cache policy
#     shows a candidate) and is in scripts/setup.sh's list, so CI's setup
#     installs the same packages on the same Debian and the test suite runs on them;
#   - every `npm run X` is a package.json script, every COPY source exists;
#   - the GPU image sets the NVIDIA container toolkit variables.
# Then every runtime dependency the images install (package.json
# `dependencies`, via the packed tarball) resolves on the registry (`npm view`).
# Exits non-zero listing every problem. WEFT_DOCKER_LINT_OFFLINE=1 skips the registry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

problems=()
bad() { problems+=("$*"); }

engines_major=$(node -p "(require('./package.json').engines.node.match(/\d+/)||[''])[0]")
setup_pkgs=" $(sed -n 's/^PACKAGES=(\(.*\))$/\1/p' scripts/setup.sh) "
scripts_json=$(node -p "Object.keys(require('./package.json').scripts).join(' ')")

for df in Dockerfile Dockerfile.cpu; do
  [[ -f $df ]] || { bad "$df: missing"; continue; }
  # Join continuation lines so each instruction is one line.
  flat=$(sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$df")

  while read -r img; do
    [[ $img =~ ^node:([0-9]+)- ]] || { bad "$df: base image $img is not node:<major>-..."; continue; }
    [[ ${BASH_REMATCH[1]} == "$engines_major" ]] || bad "$df: base image $img, but engines.node asks for $engines_major"
  done < <(grep -E '^FROM ' <<<"$flat" | awk '{print $2}')

  apt=$(grep -oE 'apt-get install [^&;]*' <<<"$flat" | sed 's/apt-get install//' | tr ' ' '\n' | grep -Ev '^(-.*|)$' || true)
  [[ -n $apt ]] || bad "$df: no apt-get install step found"
  for p in $apt; do
    policy=$(apt-cache policy "$p" 2>/dev/null || true)
    [[ $policy == *'Candidate: '[0-9]* ]] || bad "$df: apt has no installable package $p"
    [[ $setup_pkgs == *" $p "* ]] || bad "$df: apt package $p is not in scripts/setup.sh PACKAGES (CI would not install it)"
  done

  for s in $(grep -oE 'npm run [a-z:_-]+' <<<"$flat" | awk '{print $3}'); do
    [[ " $scripts_json " == *" $s "* ]] || bad "$df: npm run $s: no such script in package.json"
  done

  while read -r line; do
    [[ $line == *--from=* ]] && continue
    read -ra words <<<"$line"
    for src in "${words[@]:1:${#words[@]}-2}"; do
      [[ -e $src ]] || bad "$df: COPY source $src does not exist"
    done
  done < <(grep -E '^COPY ' <<<"$flat")

  grep -q '"weft"' <<<"$flat" || bad "$df: the entry point is not the weft command"
done

grep -q 'NVIDIA_VISIBLE_DEVICES=all' Dockerfile || bad "Dockerfile: NVIDIA_VISIBLE_DEVICES=all not set"
grep -Eq 'NVIDIA_DRIVER_CAPABILITIES=[a-z,]*graphics' Dockerfile || bad "Dockerfile: NVIDIA_DRIVER_CAPABILITIES lacks graphics (Vulkan)"
grep -Eq 'NVIDIA_DRIVER_CAPABILITIES=[a-z,]*compute' Dockerfile || bad "Dockerfile: NVIDIA_DRIVER_CAPABILITIES lacks compute"

if [[ ${WEFT_DOCKER_LINT_OFFLINE:-} != 1 ]]; then
  while IFS=$'\t' read -r name range; do
    v=$(npm view "$name@$range" version 2>/dev/null | tail -n 1 || true)
    [[ -n $v ]] || bad "npm: no version of $name matches $range"
  done < <(node -e 'for (const [n, r] of Object.entries(require("./package.json").dependencies)) console.log(`${n}\t${r}`)')
fi

if ((${#problems[@]})); then
  printf 'docker_lint: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "docker_lint: Dockerfile, Dockerfile.cpu OK"
