#!/usr/bin/env bash
# Exported weights in PyG: for each model, tessera-train on a dataset (Kipf & Welling's
# settings, GAT's from its paper) writes its weights (--export-weights) and its logits
# (--predictions); scripts/export_pyg.py loads the weights into the stock PyG layers (GCNConv,
# SAGEConv, GINConv, GATConv; fp32) and compares their logits with Tessera's. Prints a table:
# the largest difference (absolute, and relative to max(|logit|, 1)) and the share of nodes
# whose predicted class agrees.
#
# Usage: scripts/bench/export_pyg.sh [--models "gcn sage gin gat"] [--dataset cora] [--no-build]
# Environment: TESSERA_BUILD_DIR, TESSERA_DATA_DIR, TESSERA_PEERS_VENV (the PyG venv, created
#   over Debian's torch when missing). Never run by the tests.
# Exit status: 1 when a model's logits differ by more than 1e-5 or a run fails.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

models="gcn sage gin gat"
dataset=cora
build=1
tessera_parse_args "$0" --models=models --dataset=dataset --no-build=build=0 -- "$@"

tessera_install_bench_deps
tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
convert="${TESSERA_BUILD_DIR}/apps/tessera-convert/tessera-convert"
tessera_require_programs "${train}" "${convert}"
peer_python="$(tessera_peers_python)"
mapfile -t data < <(tessera_data_flags)

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
"${convert}" --dataset "${dataset}" "${data[@]}" --out "${work}/graph.npz" >/dev/null

status=0
echo "| model | test accuracy | max abs. difference | relative | classes agree |"
echo "|---|---|---|---|---|"
for model in ${models}; do
  flags=(--model "${model}")
  if [[ "${model}" == gat ]]; then
    flags+=(--hidden 8 --heads 8 --dropout 0.6 --lr 0.005)
  fi
  if ! "${train}" --dataset "${dataset}" "${data[@]}" "${flags[@]}" --threads 1 \
    --report "${work}/${model}.json" --export-weights "${work}/${model}-weights.npz" \
    --predictions "${work}/${model}.npz" >"${work}/${model}.log" 2>&1; then
    echo "${model}: tessera-train failed; the end of its output:" >&2
    tail -n 20 "${work}/${model}.log" >&2
    exit 1
  fi
  accuracy="$(tessera_json_get "${work}/${model}.json" metrics.final_test_accuracy)"
  check_status=0
  line="$("${peer_python}" "${TESSERA_ROOT}/scripts/export_pyg.py" \
    --weights "${work}/${model}-weights.npz" --graph "${work}/graph.npz" \
    --predictions "${work}/${model}.npz" 2>&1 | tail -n 2)" || check_status=$?
  ((check_status == 0)) || status=1
  "${TESSERA_PYTHON}" -c '
import re, sys
model, accuracy, text = sys.argv[1], float(sys.argv[2]), sys.argv[3]
m = re.search(r"= (\S+) \((\S+) relative.*agree on (\S+)%", text)
if not m:
    sys.exit(f"{model}: export_pyg.py said: {text}")
print(f"| {model} | {100 * accuracy:.2f} % | {m.group(1)} | {m.group(2)} | {m.group(3)} % |")
' "${model}" "${accuracy}" "${line}"
done
exit "${status}"
