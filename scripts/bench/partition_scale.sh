#!/usr/bin/env bash
# Partitioning past the machines we can test on: RMAT graphs (edge factor 16) cut in one process
# into P = 64, 128, 256, 512 and 1024 parts by METIS k-way and Zoltan's hypergraph partitioner
# with the settings it has over ranks (hypergraph-ranks: the default of a distributed cut),
# each cut's time, peak memory and halo volume, and the epoch of a 2-layer GCN (128-128-16) on a
# cluster of one A100-class GPU per part (100 Gb/s link, 5 us per message) that Tessera's cost
# model predicts from the cut, next to CAGNET's 1D and 1.5D (c = 2, 4) algorithms under the same
# rates (tessera-bench-partition-scale; the assumptions are printed above the table).
#
# Usage: scripts/bench/partition_scale.sh [--quick] [--scales "S ..."] [--json FILE] [--no-build]
#                                         [-- BENCH FLAGS...]
#   --quick        scale 16, P = 16, 32, 64, both methods (about half a minute)
#   --scales "S"   RMAT scales, 2^S vertices (default "18 22"; the hypergraph runs up to 18)
#   --json FILE    also write the rows as JSON
#   --no-build     use the existing build instead of installing deps and building
#   BENCH FLAGS    passed on, e.g. --link-gbits 200 --latency-us 2 --max-hypergraph-scale 20
#                  (tessera-bench-partition-scale --help lists them)
# Environment: TESSERA_BUILD_DIR (default <repo>/build).
#
# The default run takes about 40 minutes (measured on a 2-core, 24 GiB machine shared with other
# jobs); why it stops at scale 22:
#   - METIS 5.1 here is serial with 32-bit ids. Scale 18 (7.6 M nonzeros): 3 to 30 s per cut,
#     0.6 GiB peak. Scale 22 (128 M): 3 minutes (P = 64) to 11 minutes (P = 1024) per cut, 30
#     minutes for the five, 11 GiB peak. Scale 23 would need ~22 GiB of the 24 and about an
#     hour; scale 24 (~520 M nonzeros) ~45 GiB, which does not fit. Add them with --scales on a
#     larger machine.
#   - Zoltan's hypergraph partitioner (PHG) is serial and superlinear: 7 to 13 s per cut at
#     scale 16, 45 to 90 s at scale 18; at least 13 to 25 minutes per cut at scale 22 (linear
#     extrapolation, printed by the benchmark), so it runs up to scale 18 only.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

quick=0
scales_arg=""
json=""
build=1
extra=()
tessera_parse_args "$0" --quick=quick=1 --scales=scales_arg --json=json --no-build=build=0 \
  --=extra -- "$@"
scales=(18 22)
parts=(64 128 256 512 1024)
if ((quick)); then
  scales=(16)
  parts=(16 32 64)
fi
if [[ -n "${scales_arg}" ]]; then
  [[ "${scales_arg}" =~ ^[1-9][0-9]*( [1-9][0-9]*)*$ ]] ||
    tessera_die "--scales must be positive integers separated by spaces, got '${scales_arg}'"
  read -ra scales <<<"${scales_arg}"
fi
[[ -z "${json}" ]] || extra=(--json "${json}" "${extra[@]}")

tessera_bench_build "${build}"
bench="${TESSERA_BUILD_DIR}/bench/tessera-bench-partition-scale"
tessera_require_programs "${bench}"

"${bench}" --scales "${scales[@]}" --parts "${parts[@]}" "${extra[@]}"
