#!/usr/bin/env bash
# Single-process CPU performance of Tessera on a generated RMAT graph (Graph500 parameters,
# edge factor 16, 128 features): SpMM effective bandwidth against the STREAM triad measured in
# the same run (target >= 0.8 at 1 thread, >= 0.85 at 2), and a full GCN epoch (hidden 128)
# against its floor, its kernels in sequence, each at its bytes / triad or (a GEMM) the slower of
# that and its flops / sgemm rate (target <= 1.3x), with peak memory against the bytes the run
# must hold (target <= 1.5x); then that epoch with --activation-dtype bf16. The triad and sgemm
# rates are measured the STREAM way: arrays of at least 4x the last-level cache, the best
# of several runs after a warm-up, printed with their median and worst (a ratio is only as
# honest as its denominator: on a busy machine the spread shows it).
#
# Usage: scripts/bench/single.sh [--scale S] [--no-build]
#   --scale S   RMAT scale: 2^S vertices (default 20, about 1M vertices; 16 for a quick look)
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build). OPENBLAS_CORETYPE is set for this
#   CPU's fast kernels unless given (see tessera_fast_blas_env in scripts/common.sh).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

tessera_parse_bench_args "$0" 20 "$@"

tessera_bench_build "${build}"
kernels="${TESSERA_BUILD_DIR}/bench/tessera-bench-kernels"
epoch="${TESSERA_BUILD_DIR}/bench/tessera-bench-gcn-epoch"
tessera_require_programs "${kernels}" "${epoch}"

tessera_log "SpMM and STREAM triad (Google Benchmark), RMAT scale ${scale}"
TESSERA_BENCH_SCALE="${scale}" "${kernels}" --benchmark_filter='Triad|StreamRead|Spmm|Sgemm' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
tessera_log "GCN epoch against its floor, RMAT scale ${scale}"
"${epoch}" --scale "${scale}" --epochs 5 --threads 1 2 --separate
tessera_log "The same epoch with --activation-dtype bf16, RMAT scale ${scale}"
"${epoch}" --scale "${scale}" --epochs 5 --threads 1 2 --activation-dtype bf16
