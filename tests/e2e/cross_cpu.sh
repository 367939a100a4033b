#!/usr/bin/env bash
# Runs comparison suites as another CPU would: Debian's OpenBLAS is built for
# every x86-64 CPU and picks its kernels (so its summation order) when it
# loads, and torch picks its vectorised kernels the same way; these settings
# make this machine pick another CPU's, so a bound that holds only on the
# CPU it was measured on fails here (tests/README.md, tests/e2e/bounds.py).
#
# usage: tests/e2e/cross_cpu.sh BIN_DIR WORK_DIR CPU [SUITE...]
#   CPU: zen3 (AMD Zen 3: OpenBLAS's Zen kernels, torch AVX2), haswell,
#        sandybridge (AVX, no FMA), nehalem (SSE only), skylakex (AVX-512)
#   SUITE: families (default), matrix, encoders_e2e, encoder_ops
# Exits 77 (CTest's "skipped") when this CPU cannot run CPU's kernels.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 3 ]; then
  echo "usage: $0 BIN_DIR WORK_DIR CPU [SUITE...]" >&2
  exit 2
fi
BIN="$1" WORK="$2" CPU="$3"
shift 3
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(families)
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
need() { # the instruction sets CPU's kernels use
  for f in "$@"; do
    if [[ "$flags" != *" $f "* ]]; then
      echo "cross_cpu.sh: this CPU lacks $f, which $CPU's kernels need: skipped"
      exit 77
    fi
  done
}
case "$CPU" in
  zen3) need avx2 fma; ENV=(OPENBLAS_CORETYPE=Zen ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2) ;;
  haswell) need avx2 fma; ENV=(OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2) ;;
  sandybridge) need avx; ENV=(OPENBLAS_CORETYPE=Sandybridge ATEN_CPU_CAPABILITY=default DNNL_MAX_CPU_ISA=AVX) ;;
  nehalem) ENV=(OPENBLAS_CORETYPE=Nehalem ATEN_CPU_CAPABILITY=default DNNL_MAX_CPU_ISA=SSE41) ;;
  skylakex) need avx512f avx512bw avx512vl avx512dq; ENV=(OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512 DNNL_MAX_CPU_ISA=AVX512_CORE) ;;
  *) echo "cross_cpu.sh: unknown CPU '$CPU' (zen3, haswell, sandybridge, nehalem, skylakex)" >&2; exit 2 ;;
esac
status=0
for suite in "${SUITES[@]}"; do
  case "$suite" in
    families|matrix|encoders_e2e|encoder_ops) ;;
    *) echo "cross_cpu.sh: unknown suite '$suite'" >&2; exit 2 ;;
  esac
  echo "== $suite as on $CPU: ${ENV[*]}"
  env "${ENV[@]}" /usr/bin/python3 "$HERE/$suite.py" "$BIN" "$WORK/$CPU.$suite" || status=1
done
exit $status
