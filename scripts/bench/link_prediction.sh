#!/usr/bin/env bash
# Link prediction side by side: tessera-train --task link (the graph autoencoder of Kipf &
# Welling 2016: GCN encoder IN-32-16, dot-product decoder, no dropout, Adam 0.01, 200 epochs,
# 85/5/10 edge split) over --seeds seeds, each seed drawing its own split, which it records; PyG's
# GAE example (scripts/bench/peer_gae.py) then trains on exactly those splits. Prints each
# framework's test ROC-AUC and AP, mean ± std (population) over the seeds, and Tessera's MRR and
# Hits@K.
#
# Usage: scripts/bench/link_prediction.sh [--dataset cora] [--seeds 10] [--epochs 200]
#            [--no-peer] [--no-build]
# Environment: TESSERA_BUILD_DIR, TESSERA_DATA_DIR, TESSERA_PEERS_VENV. Never run by the tests.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

dataset=cora
seeds=10
epochs=200
peer=1
build=1
tessera_parse_args "$0" --dataset=dataset --seeds=seeds --epochs=epochs --no-peer=peer=0 \
  --no-build=build=0 -- "$@"
tessera_require_positive_int --seeds "${seeds}"

tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
convert="${TESSERA_BUILD_DIR}/apps/tessera-convert/tessera-convert"
tessera_require_programs "${train}" "${convert}"
mapfile -t data < <(tessera_data_flags)
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

"${convert}" --dataset "${dataset}" "${data[@]}" --out "${work}/graph.npz" >/dev/null
features="$("${TESSERA_PYTHON}" -c 'import sys, numpy as np
z = np.load(sys.argv[1])
print(z["attr_shape"][1] if "attr_shape" in z else z["features"].shape[1])' "${work}/graph.npz")"
splits=()
reports=()
for ((seed = 0; seed < seeds; ++seed)); do
  if ! "${train}" --dataset "${dataset}" "${data[@]}" --task link --layers "${features}-32-16" \
    --dropout 0 --weight-decay 0 --lr 0.01 --epochs "${epochs}" --eval-every 10 --threads 1 \
    --seed "${seed}" --link-split-out "${work}/split-${seed}.npz" \
    --report "${work}/seed-${seed}.json" >"${work}/seed-${seed}.log" 2>&1; then
    echo "seed ${seed}: tessera-train failed; the end of its output:" >&2
    tail -n 20 "${work}/seed-${seed}.log" >&2
    exit 1
  fi
  splits+=("${work}/split-${seed}.npz")
  reports+=("${work}/seed-${seed}.json")
done
"${TESSERA_PYTHON}" -c '
import json, statistics, sys
m = [json.load(open(p))["metrics"] for p in sys.argv[1:]]
names = [("test ROC-AUC", "test_roc_auc"), ("AP", "test_ap"), ("MRR", "test_mrr"),
         ("Hits@20", "test_hits@20"), ("Hits@50", "test_hits@50"), ("Hits@100", "test_hits@100")]
parts = []
for name, key in names:
    v = [r[key] for r in m]
    parts.append(f"{name} {statistics.mean(v):.4f} ± {statistics.pstdev(v):.4f}")
print(f"Tessera over {len(m)} seeds: " + ", ".join(parts))
' "${reports[@]}"
if ((peer)); then
  peer_python="$(tessera_peers_python)"
  "${peer_python}" "${TESSERA_ROOT}/scripts/bench/peer_gae.py" --npz "${work}/graph.npz" \
    --splits "${splits[@]}" --epochs "${epochs}" | tail -n 1 | "${TESSERA_PYTHON}" -c '
import json, sys
r = json.loads(sys.stdin.read())
auc, auc_std, ap, ap_std = (r[k] for k in ("test_roc_auc_mean", "test_roc_auc_std",
                                           "test_ap_mean", "test_ap_std"))
print(f"PyG GAE on the same splits: test ROC-AUC {auc:.4f} ± {auc_std:.4f}, "
      f"AP {ap:.4f} ± {ap_std:.4f}")'
fi
