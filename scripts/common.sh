#!/usr/bin/env bash
# Shared helpers for Tessera's scripts: repo root, dependency checks, build, data dir.
#
# Usage (from another script; it is not meant to be run):
#   source "$(dirname "${BASH_SOURCE[0]}")/common.sh"        # scripts/*.sh
#   source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"     # scripts/bench/*.sh
#
# Provides:
#   TESSERA_ROOT               repository root (absolute)
#   TESSERA_BUILD_DIR          default build folder ($TESSERA_BUILD_DIR, else <repo>/build)
#   TESSERA_PYTHON             Python with Debian's torch ($TESSERA_PYTHON, else /usr/bin/python3)
#   tessera_usage              print the calling script's header comment (for --help)
#   tessera_die MSG            print "error: MSG" to stderr and exit 1
#   tessera_install_deps       build/test Debian packages: install what is missing (root) or
#                              print the exact sudo line and exit 1 (not root)
#   tessera_install_bench_deps the extras of the PyTorch comparison (torch, numpy, tcmalloc)
#   tessera_fast_blas_env      export OPENBLAS_CORETYPE for this CPU's fast kernels unless set
#   tessera_parse_args SCRIPT SPEC... -- ARGS...   the one flag parser of the scripts: each
#                              SPEC names a flag and the global it sets (below); --help
#   tessera_require_positive_int FLAG VALUE   refuse VALUE unless it is an integer >= 1
#   tessera_parse_bench_args SCRIPT SCALE ARGS...   --scale/--no-build/--help of the benchmarks
#   tessera_parse_section_args SCRIPT ARGS...   --quick/--no-build/--help and SECTION names of
#                              the benchmarks made of sections (reads the array `sections`)
#   tessera_build [DIR]        configure (Release, Ninja, native arch) and build with nproc jobs
#   TESSERA_FUZZ_BUILD_DIR     the sanitizer + libFuzzer build ($TESSERA_FUZZ_BUILD_DIR, else
#                              <repo>/build-fuzz), shared by scripts/fuzz.sh and scripts/test.sh
#   tessera_build_sanitized TARGET...   configure TESSERA_FUZZ_BUILD_DIR (clang, ASan + UBSan,
#                              libFuzzer harnesses, CUDA off) and build only TARGETs
#   tessera_data_dir           print $TESSERA_DATA_DIR, else <repo>/../shared/datasets if it
#                              exists, else nothing
#   tessera_tcmalloc_path      print the path of libtcmalloc_minimal.so.4 (empty if absent)
#   tessera_json_get FILE KEY...  print the value at the first dotted KEY present in a
#                              JSON file (e.g. timing.epoch_ms_median); fails if none is
# and exports the Open MPI settings that let mpirun work as root inside containers.

TESSERA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TESSERA_BUILD_DIR="${TESSERA_BUILD_DIR:-${TESSERA_ROOT}/build}"
TESSERA_PYTHON="${TESSERA_PYTHON:-/usr/bin/python3}"
if [[ ! -x "${TESSERA_PYTHON}" ]]; then
  TESSERA_PYTHON="$(command -v python3 || true)"
fi
TESSERA_FUZZ_BUILD_DIR="${TESSERA_FUZZ_BUILD_DIR:-${TESSERA_ROOT}/build-fuzz}"
export TESSERA_ROOT TESSERA_BUILD_DIR TESSERA_PYTHON TESSERA_FUZZ_BUILD_DIR

# Open MPI refuses to run as root without these; vader's CMA copy fails in most containers.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

TESSERA_DEPS=(
  build-essential cmake ninja-build pkg-config ccache
  libopenblas-openmp-dev libmetis-dev libboost-graph-dev
  libptscotch-dev libtrilinos-zoltan-dev
  libopenmpi-dev openmpi-bin zlib1g-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # scripts/convert_dataset.py (pickled npz and raw Planetoid files), scripts/plot.py (the
  # figures) and their tests.
  python3-numpy python3-scipy python3-matplotlib
  # The sanitizer and fuzz build: Debian 12's default clang (14) lacks the builtin behind
  # std::source_location, which tessera::Error uses, so clang 16 with its own sanitizer and
  # libFuzzer runtimes (not a dependency of clang-16) and OpenMP (libomp-16-dev conflicts with
  # libomp-dev, LLVM 14's, which gcc builds do not need: they use libgomp).
  clang-16 libclang-rt-16-dev libomp-16-dev
)
TESSERA_CLANG_CXX=clang++-16
TESSERA_CLANG_CC=clang-16
TESSERA_BENCH_DEPS=(python3-torch python3-numpy python3-venv libtcmalloc-minimal4)

tessera_usage() {
  # The header is the first block of comment lines, after an optional shebang.
  local script="${1:-$0}"
  awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${script}"
}

tessera_die() {
  echo "error: $*" >&2
  exit 1
}

tessera_log() {
  echo "==> $*" >&2
}

# Installs the given Debian packages that `dpkg -s` does not report as installed.
tessera_apt_ensure() {
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg -s "${pkg}" 2>/dev/null | grep -q '^Status: install ok installed'; then
      missing+=("${pkg}")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if ((EUID != 0)); then
    echo "Missing Debian packages: ${missing[*]}" >&2
    echo "Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  tessera_log "installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

tessera_install_deps() {
  tessera_apt_ensure "${TESSERA_DEPS[@]}"
}

# OpenBLAS 0.3.21 (Debian 12) does not know recent Xeons and falls back to its SSE3 "Prescott"
# kernels, about 4x slower GEMM. It reads OPENBLAS_CORETYPE once at load, so the demo and the
# benchmarks set it (for every program they start, PyTorch included) unless the caller did.
# Tests keep the library's own choice.
tessera_fast_blas_env() {
  if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
      export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
      export OPENBLAS_CORETYPE=Haswell
    fi
  fi
}

# tessera_parse_args SCRIPT SPEC... -- ARGS...: parses ARGS into the caller's globals as the
# SPECs say, in order (a flag given twice: the last one counts). A SPEC is one of
#   --flag=VAR=VALUE  a switch: sets VAR to VALUE (--quick=quick=1, --no-build=build=0)
#   --flag=VAR        a flag with a value: sets VAR to the next argument, whatever it is
#   @ARRAY            words (arguments not starting with -) are appended to ARRAY
#   *ARRAY            every other argument (unknown flags, their values, words) is appended
#   --=ARRAY          the arguments after a "--" are appended to ARRAY (not the -- itself)
# -h and --help print SCRIPT's header (tessera_usage) and exit 0; anything no SPEC takes ends
# the script with "unknown argument". The caller sets the defaults first and checks the values
# after (tessera_require_positive_int).
tessera_parse_args() {
  local _tp_script="$1" _tp_spec _tp_words="" _tp_rest="" _tp_tail=""
  local -A _tp_switch=() _tp_value=()
  shift
  while (($# > 0)) && [[ "$1" != -- ]]; do
    _tp_spec="$1"
    shift
    case "${_tp_spec}" in
      @*) _tp_words="${_tp_spec#@}" ;;
      \**) _tp_rest="${_tp_spec#\*}" ;;
      --=*) _tp_tail="${_tp_spec#--=}" ;;
      --*=*=*) _tp_switch["${_tp_spec%%=*}"]="${_tp_spec#*=}" ;;
      --*=*) _tp_value["${_tp_spec%%=*}"]="${_tp_spec#*=}" ;;
      *) tessera_die "tessera_parse_args: '${_tp_spec}' is no SPEC" ;;
    esac
  done
  (($# > 0)) || tessera_die "tessera_parse_args: no -- before the arguments"
  shift
  [[ -z "${_tp_words}" ]] || local -n _tp_words_of="${_tp_words}"
  [[ -z "${_tp_rest}" ]] || local -n _tp_rest_of="${_tp_rest}"
  [[ -z "${_tp_tail}" ]] || local -n _tp_tail_of="${_tp_tail}"
  while (($# > 0)); do
    if [[ "$1" == -h || "$1" == --help ]]; then
      tessera_usage "${_tp_script}"
      exit 0
    elif [[ -n "${_tp_switch[$1]+set}" ]]; then
      printf -v "${_tp_switch[$1]%%=*}" '%s' "${_tp_switch[$1]#*=}"
    elif [[ -n "${_tp_value[$1]+set}" ]]; then
      (($# >= 2)) || tessera_die "$1 needs a value"
      printf -v "${_tp_value[$1]}" '%s' "$2"
      shift
    elif [[ "$1" == -- && -n "${_tp_tail}" ]]; then
      shift
      _tp_tail_of+=("$@")
      break
    elif [[ -n "${_tp_rest}" ]]; then
      _tp_rest_of+=("$1")
    elif [[ -n "${_tp_words}" && "$1" != -* ]]; then
      _tp_words_of+=("$1")
    else
      tessera_die "unknown argument '$1' (see --help)"
    fi
    shift
  done
}

tessera_require_positive_int() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || tessera_die "$1 must be a positive integer, got '$2'"
}

# The flags single.sh, partition.sh and scaling.sh share. Usage: tessera_parse_bench_args
# SCRIPT DEFAULT_SCALE "$@". Sets the globals `scale` (--scale S, else DEFAULT_SCALE) and
# `build` (0 with --no-build, else 1); --help prints SCRIPT's header and exits.
# shellcheck disable=SC2034  # scale and build are read by the calling script
tessera_parse_bench_args() {
  local script="$1"
  scale="$2"
  build=1
  shift 2
  tessera_parse_args "${script}" --scale=scale --no-build=build=0 -- "$@"
  tessera_require_positive_int --scale "${scale}"
}

# The flags of the benchmarks made of sections (offload.sh, comm.sh, hetero.sh). Usage:
# tessera_parse_section_args SCRIPT "$@", with the array `sections` set (what `all` and no
# section at all mean, in order). Sets the globals `quick` (1 with --quick), `build` (0 with
# --no-build) and `chosen` (the sections named, in order); --help prints SCRIPT's header.
# shellcheck disable=SC2034  # quick, build and chosen are read by the calling script
tessera_parse_section_args() {
  local script="$1" word s known
  local named=()
  shift
  quick=0
  build=1
  chosen=()
  tessera_parse_args "${script}" --quick=quick=1 --no-build=build=0 @named -- "$@"
  for word in "${named[@]}"; do
    if [[ "${word}" == all ]]; then
      chosen+=("${sections[@]}")
      continue
    fi
    known=0
    for s in "${sections[@]}"; do [[ "${word}" == "${s}" ]] && known=1; done
    ((known)) || tessera_die "unknown section '${word}'; sections: ${sections[*]} or all"
    chosen+=("${word}")
  done
  ((${#chosen[@]} > 0)) || chosen=("${sections[@]}")
}

tessera_install_bench_deps() {
  tessera_apt_ensure "${TESSERA_BENCH_DEPS[@]}"
}

# tessera_data_flags: prints --data-dir DIR (one word per line) when tessera_data_dir finds one;
# use as mapfile -t data < <(tessera_data_flags).
tessera_data_flags() {
  local dir
  dir="$(tessera_data_dir)"
  [[ -z "${dir}" ]] || printf '%s\n' --data-dir "${dir}"
}

# tessera_peers_python: prints the Python of the peers' venv ($TESSERA_PEERS_VENV, default
# ~/.cache/tessera/peers-venv: a venv over Debian's python3-torch), creating it and installing
# torch_geometric 2.3.1 into it when missing. Benchmarks only, never the tests.
tessera_peers_python() {
  local venv="${TESSERA_PEERS_VENV:-${XDG_CACHE_HOME:-${HOME}/.cache}/tessera/peers-venv}"
  if [[ ! -x "${venv}/bin/python" ]]; then
    tessera_log "creating ${venv} over Debian's torch"
    mkdir -p "$(dirname "${venv}")"
    "${TESSERA_PYTHON}" -m venv --system-site-packages "${venv}" >&2
  fi
  if ! "${venv}/bin/python" -c 'import torch_geometric' 2>/dev/null; then
    tessera_log "installing torch_geometric 2.3.1 into ${venv}"
    "${venv}/bin/python" -m pip install -q torch_geometric==2.3.1 >&2
  fi
  echo "${venv}/bin/python"
}

# ccache serves the compiles of unchanged sources from its cache (~/.cache/ccache), across the
# build folders and across clones of the tree: paths below the tree are hashed relative to it.
# A launcher only where ccache is installed (tessera_install_deps installs it).
export CCACHE_BASEDIR="${TESSERA_ROOT}" CCACHE_NOHASHDIR=true
TESSERA_LAUNCHERS=()
if command -v ccache >/dev/null 2>&1; then
  TESSERA_LAUNCHERS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

tessera_build() {
  local dir="${1:-${TESSERA_BUILD_DIR}}"
  local generator=()
  # An existing build folder keeps the generator it was made with; cmake refuses a change.
  if [[ ! -f "${dir}/CMakeCache.txt" ]]; then
    generator=(-G Ninja)
  fi
  tessera_log "configuring ${dir}"
  cmake -S "${TESSERA_ROOT}" -B "${dir}" "${generator[@]}" "${TESSERA_LAUNCHERS[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE_ARCH=ON
  tessera_log "building ${dir} with $(nproc) jobs"
  cmake --build "${dir}" --parallel "$(nproc)"
}

tessera_build_sanitized() {
  local dir="${TESSERA_FUZZ_BUILD_DIR}"
  if [[ ! -f "${dir}/CMakeCache.txt" ]]; then
    tessera_log "configuring ${dir} (${TESSERA_CLANG_CXX}, ASan + UBSan, libFuzzer)"
    # The compiler is fixed when a build folder is made; later runs reuse the cache as it is.
    CC="${TESSERA_CLANG_CC}" CXX="${TESSERA_CLANG_CXX}" cmake -S "${TESSERA_ROOT}" -B "${dir}" \
      -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=OFF \
      -DTESSERA_SANITIZE=address,undefined -DTESSERA_FUZZ=ON -DTESSERA_BUILD_BENCHMARKS=OFF \
      >/dev/null
  fi
  cmake -S "${TESSERA_ROOT}" -B "${dir}" "${TESSERA_LAUNCHERS[@]}" >/dev/null
  tessera_log "building $* in ${dir} with $(nproc) jobs"
  cmake --build "${dir}" --parallel "$(nproc)" --target "$@"
}

tessera_data_dir() {
  if [[ -n "${TESSERA_DATA_DIR:-}" ]]; then
    echo "${TESSERA_DATA_DIR}"
  elif [[ -d "${TESSERA_ROOT}/../shared/datasets" ]]; then
    (cd "${TESSERA_ROOT}/../shared/datasets" && pwd -P)
  fi
}

tessera_tcmalloc_path() {
  local lib
  lib="$(ldconfig -p 2>/dev/null | awk '$1 == "libtcmalloc_minimal.so.4" { print $NF; exit }')"
  if [[ -z "${lib}" && -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ]]; then
    lib=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
  fi
  echo "${lib}"
}

# The folder a benchmark keeps its graphs, stores, reports and logs in: WORK when set (created,
# kept and reused), else a temporary one removed at exit unless KEEP=1. Sets the global `work`.
# shellcheck disable=SC2034  # work is read by the calling script
# tessera_bench_build BUILD: with BUILD 1 (no --no-build), installs what is missing and builds
# the tree, as every benchmark script does first.
tessera_bench_build() {
  if (($1)); then
    tessera_install_deps
    tessera_build "${TESSERA_BUILD_DIR}"
  fi
}

# tessera_require_programs PROGRAM...: dies naming the first PROGRAM that is not built.
tessera_require_programs() {
  local program
  for program in "$@"; do
    [[ -x "${program}" ]] || tessera_die "${program} not found (build first, or drop --no-build)"
  done
}

tessera_bench_work_dir() {
  work="${WORK:-}"
  if [[ -n "${work}" ]]; then
    mkdir -p "${work}"
    KEEP=1
  else
    work="$(mktemp -d)"
  fi
  if [[ "${KEEP:-0}" == 1 ]]; then
    trap 'echo "reports and logs kept in ${work}"' EXIT
  else
    trap 'rm -rf "${work}"' EXIT
  fi
}

# tessera_bench_train NAME RANKS FLAGS...: one tessera-train run (the global `train`) on RANKS
# ranks, one OpenMP thread each; the report in ${work}/NAME.json, the output in
# ${work}/NAME.log (its end printed, and the script ended, if the run fails).
tessera_bench_train() {
  local name="$1" ranks="$2"
  shift 2
  if ! OMP_NUM_THREADS=1 mpirun -np "${ranks}" --oversubscribe --bind-to none -x OMP_NUM_THREADS \
    "${train}" --threads 1 --report "${work}/${name}.json" "$@" >"${work}/${name}.log" 2>&1; then
    echo "${name}: tessera-train failed; the end of its output:" >&2
    tail -n 20 "${work}/${name}.log" >&2
    exit 1
  fi
}

tessera_json_get() {
  "${TESSERA_PYTHON}" -c '
import json, sys
path, keys = sys.argv[1], sys.argv[2:]
report = json.load(open(path))
for key in keys:
    value = report
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is not None:
        print(value)
        sys.exit(0)
sys.exit(f"error: {path} has none of the keys {keys}")
' "$@"
}

# tessera_json_field FILE KEY: tessera_json_get's value, or "-" when the file is empty or lacks
# the key (a benchmark's table cell for a run that failed).
tessera_json_field() {
  [[ -s "$1" ]] || {
    echo -
    return
  }
  tessera_json_get "$1" "$2" 2>/dev/null || echo -
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  tessera_usage "${BASH_SOURCE[0]}"
  exit 0
fi
