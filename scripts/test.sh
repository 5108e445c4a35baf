#!/usr/bin/env bash
# Tessera's single test entry point: installs missing Debian packages, builds
# (Release, Ninja) and runs the whole test suite with ctest.
#
# Usage: scripts/test.sh [--help] [CTEST_ARGS...]
#   CTEST_ARGS are passed to ctest after the defaults (--output-on-failure -j2),
#   e.g. scripts/test.sh -R Spmm   or   scripts/test.sh -L mpi
# Environment: TESSERA_BUILD_DIR (default <repo>/build).
# Exit status: ctest's.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  tessera_usage "$0"
  exit 0
fi

tessera_install_deps
tessera_build "${TESSERA_BUILD_DIR}"
tessera_log "running tests"
exec ctest --test-dir "${TESSERA_BUILD_DIR}" --output-on-failure -j2 "$@"
