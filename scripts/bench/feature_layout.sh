#!/usr/bin/env bash
# Where dense features train faster than sparse ones (graph::kDenseFeatureDensity): a 2-layer
# GCN (hidden 64, 60 epochs) on a graph of Amazon Photo's shape (7,650 nodes, ~238 k adjacency
# entries, 745 features, 8 classes) whose features hold 2 ... 40 % nonzeros, trained with
# --feature-layout sparse and dense side by side at 1 and 2 threads: median epoch of each,
# their ratio, and the density where they cross. The graph and features are random (numpy);
# only the time matters here.
#
# Usage: scripts/bench/feature_layout.sh [--quick] [--no-build]
#   --quick     densities 5, 15 and 30 % only, 30 epochs
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); WORK (keep the npz files and logs
#   there); KEEP=1 keeps the temporary folder.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

quick=0
build=1
tessera_parse_args "$0" --quick=quick=1 --no-build=build=0 -- "$@"
tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
tessera_require_programs "${train}"
tessera_bench_work_dir

densities=(2 5 10 15 20 26 40)
epochs=60
if ((quick)); then
  densities=(5 15 30)
  epochs=30
fi

tessera_log "writing the graphs (${densities[*]} % nonzero features) to ${work}"
"${TESSERA_PYTHON}" - "${work}" "${densities[@]}" <<'EOF'
import sys
import numpy as np
import scipy.sparse as sp

work, densities = sys.argv[1], [int(d) for d in sys.argv[2:]]
rng = np.random.default_rng(0)
n, f, e = 7650, 745, 119081
a = sp.csr_matrix((np.ones(e), (rng.integers(0, n, e), rng.integers(0, n, e))), shape=(n, n))
a = sp.csr_matrix(((a + a.T) > 0).astype(np.float32))
a = sp.csr_matrix(a - sp.diags(a.diagonal()))
a.eliminate_zeros()
a.sort_indices()
labels = rng.integers(0, 8, n)
for d in densities:
    x = sp.random(n, f, density=d / 100, random_state=d, format="csr", dtype=np.float32)
    x.sort_indices()
    np.savez(f"{work}/features_{d}.npz", adj_indptr=a.indptr.astype("<i8"),
             adj_indices=a.indices.astype("<i8"), labels=labels.astype("<i8"),
             attr_indptr=x.indptr.astype("<i8"), attr_indices=x.indices.astype("<i8"),
             attr_data=x.data.astype("<f4"), attr_shape=np.array(x.shape, dtype="<i8"))
EOF

# median epoch ms of one run
epoch_ms() {
  local d="$1" layout="$2" threads="$3" name="features_$1_$2_$3"
  if ! "${train}" --dataset "npz:${work}/features_${d}.npz" --epochs "${epochs}" --hidden 64 \
    --threads "${threads}" --feature-layout "${layout}" --report "${work}/${name}.json" \
    >"${work}/${name}.log" 2>&1; then
    tail -n 20 "${work}/${name}.log" >&2
    tessera_die "tessera-train failed on ${d} % ${layout}"
  fi
  tessera_json_get "${work}/${name}.json" timing.epoch_ms_median
}

echo
echo "| threads | nonzeros | sparse epoch | dense epoch | sparse / dense |"
echo "|---|---|---|---|---|"
for threads in 1 2; do
  crossing=""
  for d in "${densities[@]}"; do
    sparse=$(epoch_ms "${d}" sparse "${threads}")
    dense=$(epoch_ms "${d}" dense "${threads}")
    ratio=$("${TESSERA_PYTHON}" -c "print(f'{${sparse} / ${dense}:.2f}')")
    printf '| %s | %s %% | %.2f ms | %.2f ms | %s |\n' "${threads}" "${d}" "${sparse}" "${dense}" \
      "${ratio}"
    if [[ -z "${crossing}" ]] && "${TESSERA_PYTHON}" -c "import sys; sys.exit(${sparse} < ${dense})"; then
      crossing="${d}"
    fi
  done
  echo "threads ${threads}: dense is faster from ${crossing:-beyond ${densities[-1]}} % nonzeros" >&2
done
