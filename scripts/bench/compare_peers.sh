#!/usr/bin/env bash
# Tessera against what users would otherwise pick, side by side on the same data, model and
# threads: a 2-layer GCN (dropout 0.5 on every layer's input, Adam lr 0.01, weight decay 5e-4
# on the first layer) in
#   tessera     tessera-train
#   pyg-csr     PyG 2.3.1 GCNConv(cached=True), Â's pattern as a torch sparse CSR tensor
#               (PyG's fast path)
#   pyg-edge    PyG GCNConv(cached=True) with edge_index (message passing)
#   dgl         DGL 1.0.4 GraphConv(norm="both") (1.1.x refuses Debian's torch "1.13.0a0")
#   torch       plain PyTorch, dense features (scripts/bench/pytorch_gcn.py)
#   torch-sx    plain PyTorch, sparse input features (--sparse-features)
# on Cora (hidden 16, 200 epochs), a generated SBM graph of 100 k nodes and one of 1 M nodes
# (128 features, 16 classes, hidden 128), at 1 and 2 threads: median epoch (ms), peak RSS of
# the process and final test accuracy of each, and Tessera's speedup over the fastest peer and
# its memory against that peer's. Then Cora's test accuracy over 10 seeds for Tessera and the
# fastest PyG variant (mean ± sample std).
# With --model gat: GAT (Veličković et al.: 8 heads of 8 on Cora, of 16 on the SBM graphs, one
# averaged output head, dropout 0.6 on inputs and attention, Adam lr 0.005, weight decay 5e-4 on
# every weight) against PyG's GATConv and DGL's GATConv (scripts/bench/peer_gat.py); a peer that
# runs out of memory shows "failed".
#
# PyG and DGL go into a virtual environment over Debian's python3-torch on first use
# (pip from PyPI; a PyPI torch wheel would pull gigabytes of CUDA libraries, so none is
# installed): $TESSERA_PEERS_VENV, default ~/.cache/tessera/peers-venv. Never run by the tests.
#
# Usage: scripts/bench/compare_peers.sh [--model gcn|gat] [--quick] [--threads T|all] [--no-build]
#   --quick      Cora and the 100 k graph (10 epochs) only, 3 seeds: a few minutes
#   --threads T  1, 2 or all (default all)
#   --no-build   use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build), TESSERA_DATA_DIR, TESSERA_PEERS_VENV,
#   WORK / KEEP=1 (keep the reports and logs).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

quick=0
build=1
threads_arg=all
model=gcn
tessera_parse_args "$0" --model=model --quick=quick=1 --no-build=build=0 \
  --threads=threads_arg -- "$@"
case "${model}" in
  gcn)
    model_flags=(--num-layers 2 --dropout 0.5 --lr 0.01 --weight-decay 5e-4)
    columns=(pyg-csr pyg-edge dgl torch torch-sx)
    ;;
  gat)
    model_flags=(--model gat --heads 8 --output-heads 1 --num-layers 2 --dropout 0.6 --lr 0.005
      --weight-decay 5e-4)
    columns=(pyg-gat dgl-gat)
    ;;
  *) tessera_die "--model must be gcn or gat, got '${model}'" ;;
esac
case "${threads_arg}" in
  all) thread_counts=(1 2) ;;
  1 | 2) thread_counts=("${threads_arg}") ;;
  *) tessera_die "--threads must be 1, 2 or all, got '${threads_arg}'" ;;
esac

tessera_install_bench_deps
tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
convert="${TESSERA_BUILD_DIR}/apps/tessera-convert/tessera-convert"
tessera_require_programs "${train}" "${convert}"
tcmalloc="$(tessera_tcmalloc_path)"
[[ -n "${tcmalloc}" ]] || tessera_die "libtcmalloc_minimal.so.4 not found"

peer_python="$(tessera_peers_python)"
venv="$(dirname "$(dirname "${peer_python}")")"
have_dgl=1
if ! "${peer_python}" -c 'import dgl' 2>/dev/null; then
  tessera_log "installing dgl 1.0.4 into ${venv}"
  "${peer_python}" -m pip install -q dgl==1.0.4 || true
  "${peer_python}" -c 'import dgl' 2>/dev/null || {
    have_dgl=0
    echo "note: DGL could not be installed or imported: its column shows '-'" >&2
  }
fi

tessera_bench_work_dir
bench="${TESSERA_ROOT}/scripts/bench"
data_dir="$(tessera_data_dir)"

# run_peer NAME PEER THREADS NPZ HIDDEN EPOCHS [SEED]: one peer run; its JSON in ${work}/NAME.json
# (empty when the run failed: its log's end is printed).
run_peer() {
  local name="$1" peer="$2" threads="$3" npz="$4" hidden="$5" epochs="$6" seed="${7:-0}"
  local common=(--npz "${npz}" --threads "${threads}" --epochs "${epochs}" --warmup 3
    --hidden "${hidden}" --seed "${seed}")
  local cmd
  case "${peer}" in
    torch) cmd=("${TESSERA_PYTHON}" "${bench}/pytorch_gcn.py" "${common[@]}") ;;
    torch-sx) cmd=("${TESSERA_PYTHON}" "${bench}/pytorch_gcn.py" "${common[@]}" --sparse-features) ;;
    pyg-csr) cmd=("${peer_python}" "${bench}/peer_gcn.py" --framework pyg-csr "${common[@]}") ;;
    pyg-edge) cmd=("${peer_python}" "${bench}/peer_gcn.py" --framework pyg-edge-index "${common[@]}") ;;
    dgl) cmd=("${peer_python}" "${bench}/peer_gcn.py" --framework dgl "${common[@]}") ;;
    pyg-gat | dgl-gat)
      cmd=("${peer_python}" "${bench}/peer_gat.py" --framework "${peer%-gat}" --mode timing
        "${common[@]}")
      ;;
  esac
  if OMP_NUM_THREADS="${threads}" LD_PRELOAD="${tcmalloc}" "${cmd[@]}" >"${work}/${name}.log" 2>&1; then
    tail -n 1 "${work}/${name}.log" >"${work}/${name}.json"
  else
    echo "warning: ${peer} failed on ${name}; the end of its output:" >&2
    tail -n 5 "${work}/${name}.log" >&2
    : >"${work}/${name}.json"
  fi
}

# run_tessera NAME THREADS HIDDEN EPOCHS SEED DATASET_ARGS...
run_tessera() {
  local name="$1" threads="$2" hidden="$3" epochs="$4" seed="$5"
  shift 5
  if ! OMP_NUM_THREADS="${threads}" "${train}" "$@" --threads "${threads}" --epochs "${epochs}" \
    --hidden "${hidden}" "${model_flags[@]}" --normalize-features true --seed "${seed}" \
    --report "${work}/${name}.json" \
    >"${work}/${name}.log" 2>&1; then
    tail -n 20 "${work}/${name}.log" >&2
    tessera_die "tessera-train failed on ${name}"
  fi
}


peers=(pyg-csr pyg-edge torch torch-sx pyg-gat)
((have_dgl)) && peers+=(dgl dgl-gat)
rows=()

# compare GRAPH NPZ HIDDEN EPOCHS DATASET_ARGS...: one row per thread count.
compare() {
  local graph="$1" npz="$2" hidden="$3" epochs="$4"
  shift 4
  local threads peer row best best_ms ms t_ms t_rss t_acc best_rss
  for threads in "${thread_counts[@]}"; do
    tessera_log "${graph}, ${threads} thread(s)"
    run_tessera "${graph}-t${threads}-tessera" "${threads}" "${hidden}" "${epochs}" 0 "$@"
    t_ms=$(tessera_json_field "${work}/${graph}-t${threads}-tessera.json" timing.epoch_ms_median)
    t_rss=$(tessera_json_field "${work}/${graph}-t${threads}-tessera.json" memory.peak_rss_bytes.max)
    t_acc=$(tessera_json_field "${work}/${graph}-t${threads}-tessera.json" metrics.final_test_accuracy)
    row="| ${graph} | ${threads} | $(printf '%.2f' "${t_ms}") ms, $(awk -v b="${t_rss}" 'BEGIN { printf "%.0f", b / 1048576 }') MiB, $(awk -v a="${t_acc}" 'BEGIN { printf "%.1f", 100 * a }') %"
    best="" best_ms=""
    for peer in "${columns[@]}"; do
      if [[ " ${peers[*]} " != *" ${peer} "* ]]; then
        row+=" | -"
        continue
      fi
      run_peer "${graph}-t${threads}-${peer}" "${peer}" "${threads}" "${npz}" "${hidden}" "${epochs}"
      ms=$(tessera_json_field "${work}/${graph}-t${threads}-${peer}.json" epoch_ms_median)
      if [[ "${ms}" == - ]]; then
        row+=" | failed"
        continue
      fi
      row+=" | $(printf '%.2f' "${ms}") ms, $(awk -v b="$(tessera_json_field "${work}/${graph}-t${threads}-${peer}.json" peak_rss_bytes)" 'BEGIN { printf "%.0f", b / 1048576 }') MiB, $(awk -v a="$(tessera_json_field "${work}/${graph}-t${threads}-${peer}.json" test_accuracy)" 'BEGIN { printf "%.1f", 100 * a }') %"
      if [[ -z "${best_ms}" ]] || awk -v a="${ms}" -v b="${best_ms}" 'BEGIN { exit !(a < b) }'; then
        best="${peer}" best_ms="${ms}"
      fi
    done
    best_rss=$(tessera_json_field "${work}/${graph}-t${threads}-${best}.json" peak_rss_bytes)
    row+=" | $(awk -v p="${best_ms}" -v t="${t_ms}" 'BEGIN { printf "%.1fx", p / t }') (${best})"
    row+=" | $(awk -v p="${best_rss}" -v t="${t_rss}" 'BEGIN { printf "%.2f", t / p }') |"
    rows+=("${row}")
  done
}

cora_hidden=16 sbm_hidden=128
[[ "${model}" == gat ]] && cora_hidden=8 sbm_hidden=16 # per head, 8 heads
if [[ -n "${data_dir}" && -f "${data_dir}/cora_planetoid/cora_planetoid.npz" ]]; then
  compare cora "${data_dir}/cora_planetoid/cora_planetoid.npz" "${cora_hidden}" 200 --dataset cora \
    --data-dir "${data_dir}"
else
  echo "note: Cora skipped: cora_planetoid/cora_planetoid.npz not found (set TESSERA_DATA_DIR)" >&2
fi
sizes=(100000)
((quick)) || sizes+=(1000000)
for nodes in "${sizes[@]}"; do
  graph="sbm-$((nodes / 1000))k"
  spec="sbm:nodes=${nodes},classes=16,avg-degree=16,p-in=0.5,features=128,noise=2"
  tessera_log "generating ${spec}"
  "${convert}" --dataset "${spec}" --out "${work}/${graph}.npz" >"${work}/${graph}-convert.log"
  compare "${graph}" "${work}/${graph}.npz" "${sbm_hidden}" \
    $((quick ? 10 : nodes >= 1000000 ? 10 : 30)) \
    --dataset "npz:${work}/${graph}.npz"
done

echo
if [[ "${model}" == gat ]]; then
  echo "GAT, 2 layers, 8 heads (of 8 on Cora, 16 on SBM) and 1 output head, dropout 0.6 on inputs"
  echo "and attention, Adam lr 0.005, weight decay 5e-4; median ms per training epoch, peak RSS,"
else
  echo "GCN, 2 layers, dropout 0.5, Adam lr 0.01, weight decay 5e-4 on layer 1; median ms per"
  echo "training epoch, peak RSS,"
fi
echo "final test accuracy. $(date +%F), $(nproc) cores,"
echo "torch $("${TESSERA_PYTHON}" -c 'import torch; print(torch.__version__)'), tcmalloc preloaded for the peers."
echo
if [[ "${model}" == gat ]]; then
  echo "| graph | threads | Tessera | PyG GATConv | DGL GATConv | Tessera speedup (fastest peer) | Tessera RSS / its |"
  echo "|---|---|---|---|---|---|---|"
else
  echo "| graph | threads | Tessera | PyG CSR | PyG edge_index | DGL | PyTorch | PyTorch sparse x | Tessera speedup (fastest peer) | Tessera RSS / its |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
fi
printf '%s\n' "${rows[@]}"
# Cora's accuracy over seeds with GAT: scripts/bench/peer_gat.py --mode accuracy and
# scripts/bench/accuracy.sh --model gat (the training guide's "Models").
[[ "${model}" == gat ]] && exit 0

# Cora's accuracy over seeds: Tessera and PyG's CSR path (the two train the same model).
if [[ -n "${data_dir}" && -f "${data_dir}/cora_planetoid/cora_planetoid.npz" ]]; then
  seeds=10
  ((quick)) && seeds=3
  tessera_log "Cora test accuracy over ${seeds} seeds (1 thread)"
  tess=() pyg=()
  for ((seed = 0; seed < seeds; seed++)); do
    run_tessera "seed${seed}-tessera" 1 16 200 "${seed}" --dataset cora --data-dir "${data_dir}"
    tess+=("$(tessera_json_field "${work}/seed${seed}-tessera.json" metrics.final_test_accuracy)")
    run_peer "seed${seed}-pyg" pyg-csr 1 "${data_dir}/cora_planetoid/cora_planetoid.npz" 16 200 "${seed}"
    pyg+=("$(tessera_json_field "${work}/seed${seed}-pyg.json" test_accuracy)")
  done
  "${TESSERA_PYTHON}" - "${tess[*]}" "${pyg[*]}" <<'EOF'
import statistics, sys
for name, values in (("Tessera", sys.argv[1]),
                     ("PyG GCNConv, CSR", sys.argv[2])):
    v = [100 * float(x) for x in values.split() if x != "-"]
    print(f"Cora, {len(v)} seeds, final-epoch test accuracy: {name}: {statistics.mean(v):.2f} ± "
          f"{statistics.stdev(v) if len(v) > 1 else 0:.2f} %")
EOF
fi
