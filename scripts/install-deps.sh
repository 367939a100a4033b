#!/usr/bin/env bash
# Installs every Debian package fsdp needs to build and test. Idempotent; run as root
# on Debian 12 (bookworm). The CUDA toolkit and NCCL, when present, come from
# /usr/local/cuda and are not installed here.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build git
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  nlohmann-json3-dev libgtest-dev libboost-context-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
  python3-torch python3-torchvision python3-numpy clang-format-19
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  libpcre2-dev libicu-dev libsentencepiece-dev sentencepiece pkg-config nodejs
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The npm references fsdp-tokenize is compared with (tests/tokenize), at the
# versions package-lock.json pins, from the npm registry.
npm_references() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/tokenize"
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    command -v npm >/dev/null || { echo "install-deps: npm is missing (nodejs)"; exit 1; }
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules)
  fi
}

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  npm_references
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_references
