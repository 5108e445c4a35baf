#!/usr/bin/env bash
# Partition quality and cost: METIS k-way, METIS recursive bisection, Zoltan's hypergraph
# partitioner and the block and random baselines side by side (tessera-partition --compare) on
# soc-Slashdot0902 (when the shared data holds it) and a generated RMAT graph, for P = 2, 4, 8 and
# 16. Each run prints its table (time, edge cut, total / max halo volume, balance, ghosts, volume
# against a 1D broadcast) and its peak memory; a summary of METIS and the hypergraph method
# against random ends the output.
#
# Usage: scripts/bench/partition.sh [--scale S] [--no-build]
#   --scale S   RMAT scale: 2^S vertices, edge factor 16 (default 20; 16 for a quick look)
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build), TESSERA_DATA_DIR (default
#   <repo>/../shared/datasets). Peak memory needs GNU time (/usr/bin/time, Debian package
#   "time"); without it that column is left out.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

tessera_parse_bench_args "$0" 20 "$@"

tessera_bench_build "${build}"
partitioner="${TESSERA_BUILD_DIR}/apps/tessera-partition/tessera-partition"
tessera_require_programs "${partitioner}"

data_dir="$(tessera_data_dir)"
datasets=()
if [[ -n "${data_dir}" && -f "${data_dir}/snap_soc_slashdot0902/soc-Slashdot0902.txt.gz" ]]; then
  datasets+=(slashdot)
else
  tessera_log "soc-Slashdot0902 not found under '${data_dir}': skipping it"
fi
datasets+=("rmat:scale=${scale},edge-factor=16,features=16,classes=4")

gnu_time=""
if [[ -x /usr/bin/time ]] && /usr/bin/time -f %M true >/dev/null 2>&1; then
  gnu_time=/usr/bin/time
else
  tessera_log "GNU time (/usr/bin/time) not found: peak memory is not reported"
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
summary="${work}/summary"
printf '%-52s %3s %12s %12s %12s %12s %8s %8s %10s\n' dataset P "metis ms" "metis vol" "hg ms" \
  "hg vol" "metis/rnd" "hg/rnd" "peak MiB" >"${summary}"

for dataset in "${datasets[@]}"; do
  for parts in 2 4 8 16; do
    tessera_log "${dataset}, P = ${parts}"
    args=(--dataset "${dataset}" --parts "${parts}" --compare)
    if [[ -n "${data_dir}" ]]; then
      args+=(--data-dir "${data_dir}")
    fi
    output="${work}/run.txt"
    peak="n/a"
    if [[ -n "${gnu_time}" ]]; then
      "${gnu_time}" -f %M -o "${work}/peak_kib" "${partitioner}" "${args[@]}" | tee "${output}"
      peak="$(awk '{ printf "%.0f", $1 / 1024 }' "${work}/peak_kib")"
      echo "peak memory: ${peak} MiB"
    else
      "${partitioner}" "${args[@]}" | tee "${output}"
    fi
    awk -v dataset="${dataset}" -v parts="${parts}" -v peak="${peak}" '
      $1 == "metis" { ms = $2; metis = $4 }
      $1 == "hypergraph" { hg_ms = $2; hg = $4 }
      $1 == "random" { random = $4 }
      END {
        metis_ratio = random > 0 ? metis / random : 0
        hg_ratio = random > 0 ? hg / random : 0
        printf "%-52s %3d %12.1f %12d %12.1f %12d %8.3f %8.3f %10s\n", dataset, parts, ms, metis,
          hg_ms, hg, metis_ratio, hg_ratio, peak
      }' "${output}" >>"${summary}"
  done
done

echo
echo "METIS k-way and the hypergraph method (hg) against random (total halo volume per layer):"
cat "${summary}"
