#!/usr/bin/env bash
# The GPU benchmark kit's driver (shipped inside dist/weft-linux-x64.tar.gz as
# scripts/gpu_bench.sh; docs/gpu.md). On a bare x86-64 GPU host (no npm, no network):
#
#   bash gpu_bench.sh weft-linux-x64.tar.gz      unpacks the archive into the work dir, then runs
#   bash weft-linux-x64/scripts/gpu_bench.sh     runs from an unpacked kit
#
# 1. finds the GPU: the kit's Vulkan loader (lib/vulkan) first on LD_LIBRARY_PATH, the NVIDIA
#    driver's ICD file as the only Vulkan driver when one is found (else the loader's own
#    search, plus SwiftShader where Debian's chromium installed it), and prints the adapter
#    Dawn picked (`weft device`);
# 2. generates the real-shape random checkpoints from --seed with the host's python3 + torch
#    (scripts/make_realshape.py, checkpoint only): Qwen2.5-0.5B and Llama-3.2-1B, every layer;
# 3. per model: Weft (lib/gpu_kit.js run: decode at batch 1, 16, 64, prefill 512, TTFT, the
#    WebGPU copy bandwidth), then PyTorch eager bf16 on the same files (scripts/torch_bench.py,
#    cuda if torch sees one, else the CPU);
# 4. prints ONE table (lib/gpu_kit.js table): Weft, PyTorch and the roofline (weight bytes
#    per step ÷ the copy bandwidth measured in this run) per model.
#
# Options:
#   --quick            CPU-sized run: the bundled stories260K instead of the real shapes, 16
#                      tokens per request, prefill 256, small copies (a few minutes on CPU)
#   --models LIST      comma list of qwen2.5-0.5b, llama-3.2-1b (default both)
#   --seed S           checkpoint and prompt seed (default 1234)
#   --workdir DIR      where the archive is unpacked and checkpoints written (default /tmp/weft-gpu-bench)
#   --budget-s S       the whole run's time budget in seconds (default 420; --quick 240)
#   --backend B        Weft's backend: auto (default), native, swiftshader, opengles
#   --no-torch         leave out the PyTorch rows
#   --allow-cpu        run the real shapes even when Dawn finds only a CPU adapter (else it stops)
# Every step runs under `timeout`, so the script ends within the budget plus a margin.
set -euo pipefail

QUICK=0
MODELS=qwen2.5-0.5b,llama-3.2-1b
SEED=1234
WORK=/tmp/weft-gpu-bench
BUDGET=
BACKEND=auto
TORCH=1
ALLOW_CPU=0
ARCHIVE=
while (($#)); do
  case $1 in
    --quick) QUICK=1 ;;
    --models) MODELS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --workdir) WORK=$2; shift ;;
    --budget-s) BUDGET=$2; shift ;;
    --backend) BACKEND=$2; shift ;;
    --no-torch) TORCH=0 ;;
    --allow-cpu) ALLOW_CPU=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "gpu_bench: unknown option $1" >&2; exit 2 ;;
    *) ARCHIVE=$1 ;;
  esac
  shift
done
BUDGET=${BUDGET:-$((QUICK ? 240 : 420))}
START=$SECONDS
say() { printf 'gpu_bench: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
left() { echo $((BUDGET - (SECONDS - START))); }

# --- the kit -----------------------------------------------------------------------------
mkdir -p "$WORK"
if [[ -n $ARCHIVE ]]; then
  [[ -f $ARCHIVE ]] || fail "no archive at $ARCHIVE"
  say "unpacking $ARCHIVE into $WORK"
  rm -rf "$WORK/weft-linux-x64"
  tar -xzf "$ARCHIVE" -C "$WORK"
  KIT=$WORK/weft-linux-x64
else
  KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fi
[[ -x $KIT/bin/node && -f $KIT/lib/gpu_kit.js ]] || fail "$KIT is not an unpacked kit (bin/node, lib/gpu_kit.js); pass the archive"
NODE=$KIT/bin/node
RESULTS=$WORK/results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"

# --- the GPU -----------------------------------------------------------------------------
# The shipped loader, then the NVIDIA driver's own libraries where the container toolkit
# mounts them (its ICD file names libGLX_nvidia.so.0 by name).
LD_LIBRARY_PATH="$KIT/lib/vulkan${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [[ -d $d ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; done
export LD_LIBRARY_PATH
if [[ -z ${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-} ]]; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json; do
    if [[ -f $f ]]; then
      # Both names: VK_DRIVER_FILES for loaders >= 1.3.234, VK_ICD_FILENAMES for older ones.
      export VK_DRIVER_FILES=$f VK_ICD_FILENAMES=$f
      say "Vulkan driver: $f"
      break
    fi
  done
fi
[[ -n ${VK_ICD_FILENAMES:-} ]] || say "no NVIDIA ICD file found: the Vulkan loader's own search decides (CPU adapters here)"
say "adapter Dawn picks (backend $BACKEND):"
"$KIT/weft" device --backend "$BACKEND" >"$RESULTS/device.json" 2>"$RESULTS/device.log" || {
  cat "$RESULTS/device.log" >&2
  fail "no WebGPU adapter (weft device)"
}
cat "$RESULTS/device.json" >&2
# The real shapes on CPU emulation would spend the whole budget on one step: stop early.
if ((!QUICK && !ALLOW_CPU)) && [[ $("$NODE" -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).isCpu' "$RESULTS/device.json") == true ]]; then
  fail "Dawn found only a CPU adapter (no GPU driver through Vulkan; see GPU.md 'How the GPU is found'); --quick or --allow-cpu to run anyway"
fi

# --- python + torch ----------------------------------------------------------------------
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
if [[ -z $PY ]]; then
  ((QUICK)) || fail "no python3 with torch: the real-shape checkpoints are generated with torch"
  TORCH=0
  say "no python3 with torch: no PyTorch rows"
else
  say "python: $PY, torch $("$PY" -c 'import torch; print(torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")')"
fi

# --- checkpoints and runs ----------------------------------------------------------------
if ((QUICK)); then
  names=(stories260K)
  WEFT_ARGS=(--new-tokens 16 --prefill 256 --ttft-prompt 32 --copy-mib 64)
  TORCH_ARGS=(--new-tokens 16 --prefill 256 --ttft-prompt 32 --copy-mib 64)
else
  IFS=, read -r -a names <<<"$MODELS"
  WEFT_ARGS=(--new-tokens 64 --prefill 512 --ttft-prompt 32 --copy-mib 1024)
  TORCH_ARGS=(--new-tokens 64 --prefill 512 --ttft-prompt 32 --copy-mib 1024)
fi
files=()
n=${#names[@]}
for i in "${!names[@]}"; do
  m=${names[$i]}
  if ((QUICK)); then
    dir=$KIT/models/stories260K
  else
    dir=$WORK/ckpt/$m-seed$SEED
    if [[ ! -f $dir/model.safetensors ]]; then
      say "writing the $m checkpoint (seed $SEED) to $dir"
      timeout "$(left)" "$PY" "$KIT/scripts/make_realshape.py" --model "$m" --out "$dir" --seed "$SEED" \
        --tokenizers "$KIT/tokenizers" --no-golden || fail "make_realshape.py $m"
    fi
  fi
  # This model's share of what is left: Weft gets two thirds of it, PyTorch the rest. Each
  # engine's own budget covers its load and warm-up too; `timeout` is only the backstop.
  share=$(($(left) / (n - i)))
  ((share > 30)) || fail "out of time budget before $m (raise --budget-s)"
  weft_s=$((TORCH ? share * 2 / 3 : share))
  say "$m: Weft (budget ${weft_s} s)"
  timeout "$weft_s" "$NODE" "$KIT/lib/gpu_kit.js" run --model "$dir" --name "$m" --backend "$BACKEND" \
    --seed "$SEED" --budget-s $((weft_s - 10)) --out "$RESULTS/$m.weft.json" "${WEFT_ARGS[@]}" ||
    say "Weft run of $m failed (exit $?)"
  if [[ -f $RESULTS/$m.weft.json ]]; then files+=("$RESULTS/$m.weft.json"); fi
  if ((TORCH)); then
    torch_s=$(($(left) - (n - i - 1) * share))
    ((torch_s > 20)) || torch_s=20
    say "$m: PyTorch (budget ${torch_s} s)"
    timeout "$torch_s" "$PY" "$KIT/scripts/torch_bench.py" --model "$dir" --name "$m" --seed "$SEED" \
      --budget-s $((torch_s - 10)) --out "$RESULTS/$m.torch.json" "${TORCH_ARGS[@]}" ||
      say "PyTorch run of $m failed (exit $?)"
    if [[ -f $RESULTS/$m.torch.json ]]; then files+=("$RESULTS/$m.torch.json"); fi
  fi
done
((${#files[@]})) || fail "no results"
echo
"$NODE" "$KIT/lib/gpu_kit.js" table --batches 1,16,64 "${files[@]}"
say "done in $((SECONDS - START)) s; results in $RESULTS"
