#!/usr/bin/env bash
# Memory of partitioning without a whole-graph process: a generated RMAT graph saved as a native
# dataset (with its split), cut into P parts and written as a partition store, once by one process
# holding the whole graph (tessera-partition --method M) and once by P ranks that each read only
# their share of the rows (mpirun -np P tessera-partition --method M: load, cut, all-to-all, tile
# building and the store write). Prints the peak memory (RSS) of the one process and of the
# largest rank, for P = 1, 2 and 4, against the one-process peak / P, and the wall time of each.
#
# Usage: scripts/bench/distributed_partition.sh [--method M] [--scale S] [--no-build]
#   --method M  ptscotch (PT-Scotch's k-way, default; parmetis: its old name), block or random.
#               PT-Scotch takes minutes on RMAT beyond scale 16 (its refinement is superlinear on power-law graphs):
#               block measures the same loading, all-to-all, tiles and store at scale 22
#   --scale S   RMAT scale: 2^S vertices, edge factor 16, 16 features (default 22; 16 for a
#               quick look)
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); WORK (keep the graph and stores there
#   and reuse the graph). Needs GNU time (/usr/bin/time, Debian package "time").
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

method=ptscotch
scale=22
build=1
tessera_parse_args "$0" --method=method --scale=scale --no-build=build=0 -- "$@"
[[ "${method}" =~ ^(ptscotch|parmetis|block|random)$ ]] ||
  tessera_die "--method must be ptscotch, block or random, got '${method}'"
tessera_require_positive_int --scale "${scale}"

if ((build)); then
  tessera_install_deps
  tessera_apt_ensure time
  tessera_build "${TESSERA_BUILD_DIR}"
fi
apps="${TESSERA_BUILD_DIR}/apps"
partitioner="${apps}/tessera-partition/tessera-partition"
converter="${apps}/tessera-convert/tessera-convert"
tessera_require_programs "${partitioner}"
[[ -x /usr/bin/time ]] || tessera_die "GNU time (/usr/bin/time) not found: apt-get install time"
tessera_bench_work_dir
export OMP_NUM_THREADS=1

graph="${work}/rmat${scale}"
if [[ ! -f "${graph}/dataset.json" ]]; then
  tessera_log "generating rmat scale ${scale} into ${graph}"
  "${converter}" --dataset "rmat:scale=${scale},edge-factor=16,features=16,classes=4" \
    --add-split --out "${graph}"
fi

# peak_mib FILE...: the largest peak (KiB, one line per process) in the files, in MiB.
peak_mib() {
  cat "$@" | awk '$1 > max { max = $1 } END { printf "%.0f", max / 1024 }'
}

printf '%3s %14s %14s %14s %8s %10s %10s\n' P "one proc MiB" "one / P MiB" "max rank MiB" \
  ratio "one s" "ranks s" >"${work}/summary"
for parts in 1 2 4; do
  tessera_log "P = ${parts}: one process"
  start=${SECONDS}
  /usr/bin/time -f %M -o "${work}/one.kib" "${partitioner}" --dataset "${graph}" \
    --parts "${parts}" --method "${method}" --out "${work}/one-${parts}" --force
  one_s=$((SECONDS - start))
  one="$(peak_mib "${work}/one.kib")"

  tessera_log "P = ${parts}: ${parts} ranks, each reading its rows"
  rm -f "${work}"/rank.*.kib
  start=${SECONDS}
  mpirun -np "${parts}" --oversubscribe --bind-to none -x OMP_NUM_THREADS \
    bash -c '/usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK}.kib" "$@"' "${work}/rank" \
    "${partitioner}" --dataset "${graph}" --parts "${parts}" --method "${method}" \
    --out "${work}/ranks-${parts}" --force
  ranks_s=$((SECONDS - start))
  ranks="$(peak_mib "${work}"/rank.*.kib)"

  awk -v p="${parts}" -v one="${one}" -v ranks="${ranks}" -v os="${one_s}" -v rs="${ranks_s}" \
    'BEGIN { printf "%3d %14d %14.0f %14d %8.2f %10d %10d\n", p, one, one / p, ranks,
             ranks / (one / p), os, rs }' >>"${work}/summary"
done

echo
echo "Peak memory of partitioning (${method}) + tile building + store writing, rmat scale ${scale}"
echo "(ratio = largest rank's peak / (one process's peak / P)):"
cat "${work}/summary"
