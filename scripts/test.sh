#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: GoogleTest and lit
# (through CTest), each test once. Exit status is non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
