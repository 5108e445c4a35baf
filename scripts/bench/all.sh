#!/usr/bin/env bash
# Every benchmark's figure, regenerated into docs/figures/ (scripts/plot.py):
#   cora_curves.png   training curves on Cora, 1 rank and 2 ranks (tessera-train --report)
#   ranks.png         per-rank compute / communication / waiting, 4 ranks on an SBM graph
#   scaling.png       median epoch against 1, 2 and 4 ranks on the same graph
#   partition.png     halo volume against random's by method and P (tessera-partition --compare:
#                     slashdot when the shared data holds it, and an RMAT graph)
#   peers.png         epoch time of Tessera, PyG, DGL and PyTorch (scripts/bench/compare_peers.sh)
#   peers_gat.png     GAT's epoch time: Tessera, PyG's and DGL's GATConv (compare_peers.sh --model gat)
#   offload.png       step time against the device budget (scripts/bench/offload.sh gnn)
#   feature_layout.png  sparse against dense features by density (feature_layout.sh)
# The logs, reports and tables behind them are kept in WORK (default: a temporary folder, named
# at the end). Small PNGs are committed; nothing else generated is.
#
# Usage: scripts/bench/all.sh [--quick] [--no-build]
#   --quick     laptop-sized: small graphs, the benchmarks' own --quick (under 10 minutes on 2
#               cores); without it the full sizes (about an hour)
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build), TESSERA_DATA_DIR, WORK, FIGURES (default
#   <repo>/docs/figures).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

quick=0
build=1
tessera_parse_args "$0" --quick=quick=1 --no-build=build=0 -- "$@"
tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
partition="${TESSERA_BUILD_DIR}/apps/tessera-partition/tessera-partition"
tessera_require_programs "${train}" "${partition}"
KEEP=1 tessera_bench_work_dir
figures="${FIGURES:-${TESSERA_ROOT}/docs/figures}"
mkdir -p "${figures}"
plot=("${TESSERA_PYTHON}" "${TESSERA_ROOT}/scripts/plot.py")
bench="${TESSERA_ROOT}/scripts/bench"
data_dir="$(tessera_data_dir)"
((quick)) && quick_flag=(--quick) || quick_flag=()
started=${SECONDS}

# mpi_train NAME RANKS FLAGS...: tessera-train on RANKS ranks (one thread each), report in WORK.
mpi_train() {
  local name="$1" ranks="$2"
  shift 2
  tessera_log "${name}: tessera-train on ${ranks} rank(s)"
  OMP_NUM_THREADS=1 mpirun -np "${ranks}" --oversubscribe --bind-to none -x OMP_NUM_THREADS \
    "${train}" --threads 1 --report "${work}/${name}.json" "$@" >"${work}/${name}.log" 2>&1 || {
    tail -n 20 "${work}/${name}.log" >&2
    tessera_die "${name} failed"
  }
}

# 1. Training curves.
if [[ -n "${data_dir}" && -f "${data_dir}/cora_planetoid/cora_planetoid.npz" ]]; then
  mpi_train cora-1 1 --dataset cora --data-dir "${data_dir}"
  mpi_train cora-2 2 --dataset cora --data-dir "${data_dir}"
  "${plot[@]}" curves "${work}/cora-1.json" "${work}/cora-2.json" -o "${figures}/cora_curves.png"
else
  echo "note: Cora not found: cora_curves.png not made (set TESSERA_DATA_DIR)" >&2
fi

# 2. Ranks and scaling.
nodes=$((quick ? 20000 : 400000))
sbm="sbm:nodes=${nodes},classes=8,avg-degree=16,p-in=0.7,features=64,noise=2"
for ranks in 1 2 4; do
  mpi_train "sbm-${ranks}" "${ranks}" --dataset "${sbm}" --epochs 20 --hidden 64
done
"${plot[@]}" ranks "${work}/sbm-4.json" -o "${figures}/ranks.png"
"${plot[@]}" scaling "${work}/sbm-1.json" "${work}/sbm-2.json" "${work}/sbm-4.json" \
  -o "${figures}/scaling.png"

# 3. Partition quality.
logs=()
scale=$((quick ? 14 : 18))
for parts in 4 8; do
  if [[ -n "${data_dir}" && -d "${data_dir}/snap_soc_slashdot0902" ]]; then
    tessera_log "partition: slashdot, P = ${parts}"
    "${partition}" --dataset slashdot --data-dir "${data_dir}" --parts "${parts}" --compare \
      >"${work}/partition-slashdot-${parts}.log" 2>&1
    logs+=("${work}/partition-slashdot-${parts}.log")
  fi
  tessera_log "partition: RMAT scale ${scale}, P = ${parts}"
  "${partition}" --dataset "rmat:scale=${scale},edge-factor=16" --parts "${parts}" --compare \
    >"${work}/partition-rmat-${parts}.log" 2>&1
  logs+=("${work}/partition-rmat-${parts}.log")
done
"${plot[@]}" partition "${logs[@]}" -o "${figures}/partition.png"

# 4. Peers. The table is the first Markdown table of the script's output.
tessera_log "peers (compare_peers.sh ${quick_flag[*]})"
WORK="${work}/peers" "${bench}/compare_peers.sh" "${quick_flag[@]}" --threads 1 --no-build \
  >"${work}/peers.md" 2>"${work}/peers.log" || {
  tail -n 20 "${work}/peers.log" >&2
  tessera_die "compare_peers.sh failed"
}
"${plot[@]}" bars "${work}/peers.md" --x graph,threads \
  --y "Tessera,PyG CSR,PyG edge_index,DGL,PyTorch,PyTorch sparse x" --log \
  --title "GCN epoch (ms), 1 thread" -o "${figures}/peers.png"

# 4b. GAT against PyG's and DGL's GATConv.
tessera_log "peers, GAT (compare_peers.sh --model gat ${quick_flag[*]})"
WORK="${work}/peers-gat" "${bench}/compare_peers.sh" --model gat "${quick_flag[@]}" --threads 1 \
  --no-build >"${work}/peers-gat.md" 2>"${work}/peers-gat.log" || {
  tail -n 20 "${work}/peers-gat.log" >&2
  tessera_die "compare_peers.sh --model gat failed"
}
"${plot[@]}" bars "${work}/peers-gat.md" --x graph,threads --y "Tessera,PyG GATConv,DGL GATConv" \
  --log --title "GAT epoch (ms), 1 thread" -o "${figures}/peers_gat.png"

# 5. Offload cost against the budget.
tessera_log "offload (offload.sh ${quick_flag[*]} gnn)"
WORK="${work}/offload" "${bench}/offload.sh" "${quick_flag[@]}" --no-build gnn \
  >"${work}/offload.md" 2>"${work}/offload.log" || {
  tail -n 20 "${work}/offload.log" >&2
  tessera_die "offload.sh failed"
}
"${plot[@]}" bars "${work}/offload.md" --x "device budget" --y "step (steady epoch)" \
  --title "GCN step (ms) under a device budget" -o "${figures}/offload.png"

# 6. Feature layout.
tessera_log "feature layout (feature_layout.sh ${quick_flag[*]})"
WORK="${work}/layout" "${bench}/feature_layout.sh" "${quick_flag[@]}" --no-build \
  >"${work}/layout.md" 2>"${work}/layout.log" || {
  tail -n 20 "${work}/layout.log" >&2
  tessera_die "feature_layout.sh failed"
}
"${plot[@]}" bars "${work}/layout.md" --x threads,nonzeros --y "sparse epoch,dense epoch" \
  --title "GCN epoch (ms): sparse or dense features" -o "${figures}/feature_layout.png"

echo "figures in ${figures} ($(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s)"
