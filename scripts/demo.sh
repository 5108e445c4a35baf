#!/usr/bin/env bash
# Tessera demo: installs missing Debian packages, builds, then trains a 2-layer GCN
# with tessera-train on its built-in generated graph (100 epochs, one process, then 2 MPI
# ranks that each hold one METIS tile) and, when the shared datasets are present, on Cora's
# public Planetoid split (200 epochs, one process and 2 ranks), followed by the GraphSAGE and
# GIN examples (apps/examples) on Cora at 2 ranks.
#
# Usage: scripts/demo.sh [--help]
# Environment: TESSERA_BUILD_DIR (default <repo>/build),
#              TESSERA_DATA_DIR (default <repo>/../shared/datasets when it exists).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
tessera_fast_blas_env

case "${1:-}" in
  "") ;;
  -h | --help)
    tessera_usage "$0"
    exit 0
    ;;
  *) tessera_die "unknown argument '$1' (see --help)" ;;
esac

tessera_install_deps
tessera_build "${TESSERA_BUILD_DIR}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
[[ -x "${train}" ]] || tessera_die "${train} was not built"

# Two ranks on this machine's cores: one OpenMP thread each.
mpi=(mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)

tessera_log "training on the built-in generated graph"
"${train}" --epochs 100
tessera_log "the same on 2 MPI ranks (rank 0 partitions with METIS, each rank trains its tile)"
"${mpi[@]}" "${train}" --epochs 100 --log-every 50

data_dir="$(tessera_data_dir)"
if [[ -n "${data_dir}" && -d "${data_dir}/cora_planetoid" ]]; then
  tessera_log "training on Cora (public split) from ${data_dir}"
  "${train}" --dataset cora --data-dir "${data_dir}" --epochs 200
  tessera_log "Cora on 2 MPI ranks: the same losses and accuracy"
  "${mpi[@]}" "${train}" --dataset cora --data-dir "${data_dir}" --epochs 200 --log-every 50
  examples="${TESSERA_BUILD_DIR}/apps/examples"
  tessera_log "the GraphSAGE and GIN examples (apps/examples, public API only) on Cora, 2 ranks"
  "${mpi[@]}" "${examples}/graphsage/tessera-example-graphsage" --dataset cora \
    --data-dir "${data_dir}" --log-every 100
  "${mpi[@]}" "${examples}/gin/tessera-example-gin" --dataset cora --data-dir "${data_dir}" \
    --log-every 100
else
  echo "note: Cora skipped: no datasets found (set TESSERA_DATA_DIR to a folder holding" \
    "cora_planetoid/, or place them in <repo>/../shared/datasets)." >&2
fi
