#!/usr/bin/env bash
# Epoch time and accuracy of a 2-layer GCN in Tessera (tessera-train) against plain
# PyTorch (scripts/bench/pytorch_gcn.py, torch.sparse.mm, tcmalloc preloaded) on the
# same data, hyperparameters and thread count, on (a) Cora's public split when the
# shared datasets exist (hidden 16) and (b) an RMAT graph made by tessera-convert
# (128 features, 16 classes, edge factor 16, hidden 128). Prints one table row per
# graph and thread count; speedup = PyTorch ms / Tessera ms. Accuracies are those of
# the final epoch (the RMAT graph's labels are random: chance is 1/16).
#
# Usage: scripts/bench/compare_pytorch.sh [--threads T|all] [--epochs E] [--scale S]
#            [--warmup W] [--no-build]
#   --threads T  threads for both (OMP_NUM_THREADS, --threads); "all" runs 1 and 2
#                (default 2)
#   --epochs E   training epochs for both (default 200 on Cora, 20 on the RMAT graph)
#   --scale S    RMAT scale: 2^S vertices (default 17 to keep the run short; the
#                issue's headline graph is --scale 20)
#   --warmup W   first epochs PyTorch leaves out of its timing (default 5; Tessera
#                reports the median epoch)
#   --no-build   use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build), TESSERA_DATA_DIR (default
#   <repo>/../shared/datasets when it exists), TESSERA_PYTHON (default /usr/bin/python3),
#   TMPDIR (where the generated graph is written).
# Exit status: 1 if any run fails (the table still shows the others).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

threads_arg=2
epochs=""
scale=17
warmup=5
build=1
tessera_parse_args "$0" --threads=threads_arg --epochs=epochs --scale=scale --warmup=warmup \
  --no-build=build=0 -- "$@"

if [[ "${threads_arg}" == all ]]; then
  thread_counts=(1 2)
elif [[ "${threads_arg}" =~ ^[1-9][0-9]*$ ]]; then
  thread_counts=("${threads_arg}")
else
  tessera_die "--threads must be a positive integer or 'all', got '${threads_arg}'"
fi
[[ -z "${epochs}" ]] || tessera_require_positive_int --epochs "${epochs}"
tessera_require_positive_int --scale "${scale}"
[[ "${warmup}" =~ ^[0-9]+$ ]] || tessera_die "--warmup must be an integer, got '${warmup}'"

tessera_install_bench_deps
tessera_bench_build "${build}"
train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
convert="${TESSERA_BUILD_DIR}/apps/tessera-convert/tessera-convert"
tessera_require_programs "${train}" "${convert}"
pytorch_gcn="${TESSERA_ROOT}/scripts/bench/pytorch_gcn.py"
tcmalloc="$(tessera_tcmalloc_path)"
[[ -n "${tcmalloc}" ]] || tessera_die "libtcmalloc_minimal.so.4 not found (apt-get install libtcmalloc-minimal4)"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
rows=()
failed=0

# Prints the end of a failed run's log and marks the whole comparison as failed.
report_failure() {
  echo "error: $1 failed; the end of its output:" >&2
  tail -n 20 "$2" >&2
  failed=1
}

# compare NAME NPZ HIDDEN EPOCHS TESSERA_DATASET_ARGS...: one row per thread count.
compare() {
  local name="$1" npz="$2" hidden="$3" epochs="$4"
  shift 4
  local threads tag py_json tess_json py_ms py_acc py_nnz tess_ms tess_acc tess_nnz
  for threads in "${thread_counts[@]}"; do
    tag="${work}/${name}-t${threads}"
    py_ms="failed" py_acc="-" py_nnz="" tess_ms="failed" tess_acc="-" tess_nnz=""

    tessera_log "${name}, ${threads} thread(s): PyTorch"
    py_json="${tag}-pytorch.json"
    if OMP_NUM_THREADS="${threads}" LD_PRELOAD="${tcmalloc}" "${TESSERA_PYTHON}" \
      "${pytorch_gcn}" --npz "${npz}" --threads "${threads}" --epochs "${epochs}" \
      --warmup "$((warmup < epochs ? warmup : epochs - 1))" --hidden "${hidden}" --dropout 0.5 --lr 0.01 \
      --weight-decay 5e-4 >"${tag}-pytorch.log" 2>&1; then
      tail -n 1 "${tag}-pytorch.log" >"${py_json}"
      py_ms="$(tessera_json_get "${py_json}" epoch_ms_median)"
      py_acc="$(tessera_json_get "${py_json}" test_accuracy)"
      py_nnz="$(tessera_json_get "${py_json}" adj_nnz)"
    else
      report_failure "PyTorch on ${name}" "${tag}-pytorch.log"
    fi

    tessera_log "${name}, ${threads} thread(s): Tessera"
    tess_json="${tag}-tessera.json"
    if OMP_NUM_THREADS="${threads}" "${train}" "$@" --epochs "${epochs}" \
      --hidden "${hidden}" --num-layers 2 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 \
      --eval-every "${epochs}" --threads "${threads}" --report "${tess_json}" \
      >"${tag}-tessera.log" 2>&1; then
      tess_ms="$(tessera_json_get "${tess_json}" timing.epoch_ms_median)"
      tess_acc="$(tessera_json_get "${tess_json}" metrics.final_test_accuracy \
        metrics.test_accuracy)"
      tess_nnz="$(tessera_json_get "${tess_json}" dataset.edges 2>/dev/null || true)"
    else
      report_failure "tessera-train on ${name}" "${tag}-tessera.log"
    fi

    if [[ -n "${py_nnz}" && -n "${tess_nnz}" && "${py_nnz}" != "${tess_nnz}" ]]; then
      echo "warning: ${name}: PyTorch's normalized adjacency has ${py_nnz} entries," \
        "Tessera's ${tess_nnz}: the two do not train on the same graph" >&2
    fi
    rows+=("$(awk -v g="${name}" -v t="${threads}" -v pm="${py_ms}" -v tm="${tess_ms}" \
      -v pa="${py_acc}" -v ta="${tess_acc}" '
      function isnum(x) { return x ~ /^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ }
      function ms(x) { return isnum(x) ? sprintf("%.2f", x) : x }
      function pct(x) { return isnum(x) ? sprintf("%.2f", 100 * x) : x }
      BEGIN {
        speedup = (isnum(pm) && isnum(tm) && tm > 0) ? sprintf("%.2fx", pm / tm) : "-"
        printf "%-14s %7s %14s %14s %8s %12s %12s", g, t, ms(pm), ms(tm), speedup, pct(pa), pct(ta)
      }')")
  done
}

data_dir="$(tessera_data_dir)"
cora_npz="${data_dir:+${data_dir}/cora_planetoid/cora_planetoid.npz}"
if [[ -n "${cora_npz}" && -f "${cora_npz}" ]]; then
  compare cora "${cora_npz}" 16 "${epochs:-200}" --dataset cora --data-dir "${data_dir}"
else
  echo "note: Cora skipped: cora_planetoid/cora_planetoid.npz not found (set TESSERA_DATA_DIR)." >&2
fi

rmat_name="rmat-s${scale}"
rmat_npz="${work}/${rmat_name}.npz"
rmat_spec="rmat:scale=${scale},edge-factor=16,features=128,classes=16"
tessera_log "generating ${rmat_spec}"
if "${convert}" --dataset "${rmat_spec}" --out "${rmat_npz}" >"${work}/convert.log" 2>&1; then
  compare "${rmat_name}" "${rmat_npz}" 128 "${epochs:-20}" --dataset "npz:${rmat_npz}"
else
  report_failure "tessera-convert --dataset ${rmat_spec}" "${work}/convert.log"
fi

echo
echo "GCN, 2 layers, dropout 0.5, Adam lr 0.01, weight decay 5e-4; median ms per training epoch"
echo "(forward + backward + step). PyTorch $("${TESSERA_PYTHON}" -c 'import torch; print(torch.__version__)')" \
  "with LD_PRELOAD=${tcmalloc}."
printf '%-14s %7s %14s %14s %8s %12s %12s\n' graph threads "PyTorch ms" "Tessera ms" speedup \
  "PyTorch acc%" "Tessera acc%"
for row in "${rows[@]}"; do
  echo "${row}"
done
if ((scale != 20)); then
  echo "note: the issue's headline graph is RMAT scale 20 (about 1M vertices, 16M edges);" \
    "run it with --scale 20."
fi
exit "${failed}"
