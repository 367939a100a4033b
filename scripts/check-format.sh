#!/usr/bin/env bash
# Every C++ and CUDA file is formatted as .clang-format says (LLVM style, 100
# columns), checked with Debian's clang-format-19. With --fix, formats them.
set -euo pipefail
cd "$(dirname "$0")/.."
CF="${CLANG_FORMAT:-clang-format-19}"
command -v "$CF" > /dev/null || { echo "check-format.sh: $CF not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')
if [ "${1:-}" = "--fix" ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$CF" --dry-run --Werror "$f" > /dev/null 2>&1; then
    echo "check-format.sh: $f is not formatted ($CF -i $f)"
    bad=$((bad + 1))
  fi
done
echo "format: $((${#files[@]} - bad)) of ${#files[@]} files formatted as .clang-format says"
[ "$bad" -eq 0 ]
