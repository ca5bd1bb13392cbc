#!/usr/bin/env bash
# One script for a GPU machine: checks what the GPU routes need, then measures the library on a
# 2 MP and a 12 MP image (made in memory from a test photo) on the chosen provider and on the CPU
# (scripts/gpu-bench.mjs): images/s at 1, 4 and 16 in flight, latency p50, GPU memory, CPU ms
# outside inference, and the largest alpha difference and the IoU against the CPU's result.
#
#   scripts/gpu-check.sh [--provider webgpu|cuda|tensorrt] [--kit DIR] [--cuda-kit DIR] [--dry-run]
#
# --kit DIR: first installs the parts of a kit made by scripts/gpu-kit.mjs (for a machine without
# Node or a registry): unpacks them in the repository's root, puts the kit's Node first on the PATH,
# unpacks Debian's Vulkan loader into /tmp/gpu-kit-root when the system has none (LD_LIBRARY_PATH),
# points the loader at NVIDIA's Vulkan ICD where the driver mounts it, and derives the float model
# (models/isnet-medium-fp32.onnx) from the published one.
#
# --cuda-kit DIR: then unpacks the cuda parts of such a kit (gpu-kit.mjs --cuda: the 1.29 core and
# its CUDA provider in .gpu/lib) and points BGONE_ORT_LIBRARY at that core unless it is set.
#
# --dry-run: the checks, then one 2 MP image on the CPU and one try of the provider (on a machine
# without a GPU, that try prints why the provider cannot start). The project must be built first
# (npm run build, the addon in build/Release or prebuilds/). Environment: BGONE_ORT_LIBRARY (for
# cuda and tensorrt: the ONNX Runtime whose provider libraries sit beside it), PYTHON (the Python
# whose site-packages/nvidia holds the CUDA and cuDNN wheels; default python3).
set -u
cd "$(dirname "$0")/.."

provider=webgpu
dry_run=0
kit=
cuda_kit=
while [ $# -gt 0 ]; do
  case "$1" in
    --provider) provider="${2:-}"; shift 2 ;;
    --provider=*) provider="${1#--provider=}"; shift ;;
    --dry-run) dry_run=1; shift ;;
    --kit) kit="${2:-}"; shift 2 ;;
    --kit=*) kit="${1#--kit=}"; shift ;;
    --cuda-kit) cuda_kit="${2:-}"; shift 2 ;;
    --cuda-kit=*) cuda_kit="${1#--cuda-kit=}"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$provider" in webgpu|cuda|cuda:*|tensorrt|tensorrt:*) ;; *) echo "gpu-check: --provider must be webgpu, cuda[:N] or tensorrt[:N]" >&2; exit 2 ;; esac

if [ -n "$kit" ]; then
  echo "== installing the kit from $kit"
  ls "$kit"/kit.* >/dev/null 2>&1 || { echo "gpu-check: no kit.NN parts in $kit" >&2; exit 2; }
  cat "$kit"/kit.* | xz -d | tar -x -C . || { echo "gpu-check: the kit does not unpack (a part missing?)" >&2; exit 2; }
  export PATH="$PWD/.gpu-kit-bin:$PATH"
  if ! (ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '); then
    for deb in .gpu-kit-deb/*.deb; do dpkg -x "$deb" /tmp/gpu-kit-root; done
    export LD_LIBRARY_PATH="/tmp/gpu-kit-root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "  the Vulkan loader unpacked into /tmp/gpu-kit-root"
  fi
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.x86_64.json; do
    if [ -e "$f" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES="$f"; echo "  VK_DRIVER_FILES=$f"; fi
  done
  if [ ! -e models/isnet-medium-fp32.onnx ]; then
    start=$(date +%s)
    node -e "import('./scripts/derive-models.mjs').then((m) => m.deriveModels({ only: ['medium-fp32'] }))" || { echo "gpu-check: deriving medium-fp32 failed" >&2; exit 2; }
    echo "  medium-fp32 derived in $(( $(date +%s) - start )) s"
  fi
fi

if [ -n "$cuda_kit" ]; then
  echo "== installing the cuda parts from $cuda_kit"
  ls "$cuda_kit"/cuda.* >/dev/null 2>&1 || { echo "gpu-check: no cuda.NN parts in $cuda_kit" >&2; exit 2; }
  cat "$cuda_kit"/cuda.* | xz -d | tar -x -C . || { echo "gpu-check: the cuda parts do not unpack (a part missing?)" >&2; exit 2; }
  export BGONE_ORT_LIBRARY="${BGONE_ORT_LIBRARY:-$PWD/.gpu/lib/libonnxruntime.so}"
  echo "  BGONE_ORT_LIBRARY=$BGONE_ORT_LIBRARY"
fi

missing=()
ok() { printf '  ok       %s\n' "$1"; }
miss() { printf '  MISSING  %s\n' "$1"; missing+=("$1"); }

echo "== checks (provider $provider)"
# The GPU and its driver.
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
  if [ -n "$gpu" ]; then ok "nvidia-smi: $gpu"; else miss "nvidia-smi answers no GPU"; fi
else
  miss "nvidia-smi (the NVIDIA driver)"
fi
# Node: the benchmark is the library itself.
if command -v node >/dev/null 2>&1; then
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -ge 20 ]; then ok "node $(node --version)"; else miss "node 20 or later (found $(node --version))"; fi
else
  miss "node (20 or later): the benchmark runs the library"
fi
# WebGPU: the Vulkan loader and a Vulkan driver (ICD) for the GPU.
vulkan=$( (ldconfig -p 2>/dev/null | grep -o '/[^ ]*libvulkan\.so\.1$' | head -n 1) || true)
[ -z "$vulkan" ] && for d in /tmp/gpu-kit-root/usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do [ -e "$d/libvulkan.so.1" ] && vulkan="$d/libvulkan.so.1" && break; done
if [ -n "$vulkan" ]; then ok "Vulkan loader: $vulkan"; else miss "Vulkan loader libvulkan.so.1 (Debian's libvulkan1), for webgpu"; fi
icd=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json ${VK_DRIVER_FILES:-} 2>/dev/null | tr '\n' ' ')
if printf '%s' "$icd" | grep -q nvidia; then ok "Vulkan ICDs: $icd"; else miss "NVIDIA's Vulkan ICD (nvidia_icd.json under /usr/share/vulkan/icd.d or /etc/vulkan/icd.d), for webgpu; found: ${icd:-none}"; fi
# CUDA and cuDNN as NVIDIA's Python wheels.
python=${PYTHON:-python3}
nvidia_libs=()
if command -v "$python" >/dev/null 2>&1; then
  for site in $("$python" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    [ -d "$site/nvidia" ] || continue
    for lib in "$site"/nvidia/*/lib; do [ -d "$lib" ] && nvidia_libs+=("$lib"); done
  done
else
  miss "$python (to find the CUDA and cuDNN wheels)"
fi
find_lib() { for d in "${nvidia_libs[@]}"; do [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }; done; ldconfig -p 2>/dev/null | grep -o "/[^ ]*$1\$" | head -n 1; }
for want in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcudnn.so.9; do
  found=$(find_lib "$want")
  if [ -n "$found" ]; then ok "$want: $found"; else miss "$want (CUDA 13 / cuDNN 9), for cuda and tensorrt"; fi
done
if [ ${#nvidia_libs[@]} -gt 0 ]; then
  export LD_LIBRARY_PATH="$(IFS=:; echo "${nvidia_libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ok "LD_LIBRARY_PATH gets ${#nvidia_libs[@]} folders of site-packages/nvidia"
fi
case "$provider" in
  cuda*|tensorrt*)
    if [ -n "${BGONE_ORT_LIBRARY:-}" ]; then
      dir=$(dirname "$BGONE_ORT_LIBRARY")
      for f in libonnxruntime_providers_shared.so libonnxruntime_providers_cuda.so; do
        if [ -e "$dir/$f" ]; then ok "$dir/$f"; else miss "$f beside BGONE_ORT_LIBRARY ($dir)"; fi
      done
      # A core built without CUDA finds GPUs for the provider plugin under /sys/class/drm.
      cards=$(ls -d /sys/class/drm/card[0-9]* 2>/dev/null | tr '\n' ' ')
      if [ -n "$cards" ]; then ok "GPUs under /sys/class/drm: $cards"; else miss "no /sys/class/drm/card*: ONNX Runtime's device discovery (the cuda plugin route) finds no GPU"; fi
      case "$provider" in tensorrt*) [ -e "$dir/libonnxruntime_providers_tensorrt.so" ] && ok "$dir/libonnxruntime_providers_tensorrt.so" || miss "libonnxruntime_providers_tensorrt.so beside BGONE_ORT_LIBRARY" ;; esac
    else
      miss "BGONE_ORT_LIBRARY: an ONNX Runtime with its CUDA provider libraries beside it, for $provider"
    fi
    ;;
esac
[ -e build/Release/bgone.node ] || ls prebuilds/*/*.node >/dev/null 2>&1 && ok "the addon" || miss "the addon (npm run build:native)"
[ -e dist/src/lib/index.js ] && ok "dist/ (npm run build)" || miss "dist/ (npm run build)"

echo "== ${#missing[@]} missing"
for m in "${missing[@]}"; do echo "  - $m"; done

if ! command -v node >/dev/null 2>&1 || [ ! -e dist/src/lib/index.js ]; then
  echo "gpu-check: cannot run the benchmark without node and dist/" >&2
  exit 1
fi
args=(--provider "$provider")
[ "$dry_run" = 1 ] && args+=(--dry-run)
exec node scripts/gpu-bench.mjs "${args[@]}"
