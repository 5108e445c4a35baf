#!/usr/bin/env bash
# Tessera's single test entry point: installs missing Debian packages, builds
# (Release, Ninja) and runs the whole test suite with ctest.
#
# Usage: scripts/test.sh [--help] [--quick] [CTEST_ARGS...]
#   --quick  the edit-loop tier: builds what changed, then runs the unit tests, the layer checks
#            and the MPI tests at 2 ranks (under a minute here on a built tree); no other stage.
#            The full run below is the gate CI runs.
#   Without CTEST_ARGS, a build that has the CUDA backend also builds the variant without it
#   (<build>-no-cuda, a shared library): links each of its layers alone, runs its op tests,
#   whose CUDA entry points are NotCompiled stubs, and builds the install consumer and the
#   examples against its install.
#   Without CTEST_ARGS, it then builds the sanitizer build (clang, ASan + UBSan, CUDA off, in
#   <repo>/build-fuzz, the folder scripts/fuzz.sh uses), runs its unit and MPI tests there and
#   fuzzes every loader for 20 s (scripts/fuzz.sh); any report fails the run.
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

if [[ "${1:-}" == "--quick" ]]; then
  shift
  tessera_install_deps
  tessera_build "${TESSERA_BUILD_DIR}"
  tessera_log "quick tier: unit tests, layer checks, MPI tests at 2 ranks"
  status=0
  ctest --test-dir "${TESSERA_BUILD_DIR}" --output-on-failure -j2 -L 'unit|layers' "$@" ||
    status=$?
  ctest --test-dir "${TESSERA_BUILD_DIR}" --output-on-failure -R '^mpi\.ranks_2$' ||
    status=$?
  exit "${status}"
fi

tessera_install_deps
tessera_build "${TESSERA_BUILD_DIR}"
tessera_log "running tests"
status=0
ctest --test-dir "${TESSERA_BUILD_DIR}" --output-on-failure -j2 "$@" || status=$?

# A machine without nvcc builds the CUDA stubs instead of the backend. When this one built the
# backend, also build that variant's op tests, so the NotCompiled path (what a fresh Debian
# machine gets) is tested here too rather than skipped; the variant is a shared library, so
# the package is also tested in its shared form.
if (($# == 0)) && grep -q '^TESSERA_CUDA_BUILT:INTERNAL=ON' "${TESSERA_BUILD_DIR}/CMakeCache.txt"; then
  stubs="${TESSERA_BUILD_DIR}-no-cuda"
  tessera_log "testing the build without CUDA (${stubs})"
  generator=()
  [[ -f "${stubs}/CMakeCache.txt" ]] || generator=(-G Ninja)
  cmake -S "${TESSERA_ROOT}" -B "${stubs}" "${generator[@]}" "${TESSERA_LAUNCHERS[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_WITH_CUDA=OFF -DBUILD_SHARED_LIBS=ON -DTESSERA_BUILD_APPS=OFF \
    -DTESSERA_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build "${stubs}" --parallel "$(nproc)" --target tessera_ops_tests \
    tessera_layer_link_checks
  output="$("${stubs}/tests/unit/ops/tessera_ops_tests" \
    --gtest_filter='Ops.CudaBackendThrowsNotCompiledInACpuOnlyBuild:CudaBackend.*' 2>&1)" ||
    status=1
  echo "${output}" | tail -n 3
  grep -q '\[  PASSED  \] 2 tests' <<<"${output}" || {
    echo "the no-CUDA build's NotCompiled tests did not both run and pass" >&2
    status=1
  }
  tessera_log "building the consumer and the examples against the shared build's install"
  cmake -DBUILD_DIR="${stubs}" -DSOURCE_DIR="${TESSERA_ROOT}/tests/install" \
    -DEXAMPLES_DIR="${TESSERA_ROOT}/apps/examples" -DEXAMPLES=graphsage,gin \
    -DWORK_DIR="${stubs}/install_test" -P "${TESSERA_ROOT}/tests/install/install_and_consume.cmake" ||
    status=1
fi

# The sanitizer stage: the same unit and MPI tests with ASan + UBSan (any report is fatal), then
# every fuzz harness briefly. Only the full run does it; filtered runs stay fast.
if (($# == 0)); then
  tessera_log "sanitizer build: unit and MPI tests under ASan + UBSan (${TESSERA_FUZZ_BUILD_DIR})"
  tessera_build_sanitized tessera_unit_and_mpi_tests tessera_fuzzers
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # One ctest run, so the one-rank MPI test (one core) runs beside unit tests. Cora's accuracy
  # over ten seeds (10x slower instrumented) is the normal build's gate; the same training code
  # runs instrumented in the other Cora and training tests. The MPI tests' sanitizer settings
  # are theirs (tests/mpi/CMakeLists.txt). The e2e and docs tests need the apps, not built here.
  ctest --test-dir "${TESSERA_FUZZ_BUILD_DIR}" --output-on-failure -j2 -L 'unit|mpi' \
    -E '^(e2e|docs)\.|OverSeeds$' || status=1
  "${TESSERA_ROOT}/scripts/fuzz.sh" --no-build --seconds 20 || status=1
fi
exit "${status}"
