#!/usr/bin/env bash
# Test accuracy of tessera-train (or an example model) over several seeds, with Kipf &
# Welling's settings (2 layers, 200 epochs, hidden 16, dropout 0.5, Adam lr 0.01, weight decay
# 5e-4): prints each seed's test accuracy and mean ± sample std. One lucky seed proves nothing.
#
# Usage: scripts/bench/accuracy.sh [--model M] [--seeds N] [--dataset SPEC] [--epochs E]
#            [--hidden H] [--dropout P] [--lr X] [--weight-decay W] [--ranks R] [--no-build]
#            [TESSERA_TRAIN_FLAGS...]
#   --model M      tessera-train's --model: gcn (default), sage, gin or gat; gin-mlp: the
#                  example program apps/examples/gin (GIN with two-layer MLPs)
#   --seeds N      runs with --seed 0..N-1 (default 10)
#   --ranks R      train on R MPI ranks (mpirun, one OpenMP thread each; default 1: no mpirun)
#   --dataset SPEC dataset for tessera-train (default cora)
#   --no-build     use the existing build instead of installing deps and building
#   Other flags (e.g. --threads 2, --data-dir DIR) go to tessera-train unchanged.
# Environment: TESSERA_BUILD_DIR (default <repo>/build); TESSERA_DATA_DIR (default
#   <repo>/../shared/datasets when it exists), passed as --data-dir unless one is given.
# Exit status: 1 if any run fails.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

model=gcn
seeds=10
dataset=cora
epochs=200
hidden=16
dropout=0.5
lr=0.01
weight_decay=5e-4
ranks=1
build=1
extra=()
tessera_parse_args "$0" --model=model --seeds=seeds --dataset=dataset --epochs=epochs \
  --hidden=hidden --dropout=dropout --lr=lr --weight-decay=weight_decay --ranks=ranks \
  --no-build=build=0 '*extra' -- "$@"
has_data_dir=0
for arg in "${extra[@]}"; do
  [[ "${arg}" == --data-dir || "${arg}" == --data-dir=* ]] && has_data_dir=1
done
tessera_require_positive_int --seeds "${seeds}"
tessera_require_positive_int --ranks "${ranks}"
launch=()
if ((ranks > 1)); then
  launch=(mpirun -np "${ranks}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
fi

tessera_bench_build "${build}"
case "${model}" in
  gcn | sage | gin | gat)
    train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
    extra=(--model "${model}" "${extra[@]}")
    ;;
  gin-mlp) train="${TESSERA_BUILD_DIR}/apps/examples/gin/tessera-example-gin" ;;
  *) tessera_die "--model must be gcn, sage, gin, gat or gin-mlp, got '${model}'" ;;
esac
tessera_require_programs "${train}"

data_dir="$(tessera_data_dir)"
if ((!has_data_dir)) && [[ -n "${data_dir}" ]]; then
  extra+=(--data-dir "${data_dir}")
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

echo "${launch[*]} $(basename "${train}") --dataset ${dataset} --epochs ${epochs} --hidden ${hidden}" \
  "--dropout ${dropout} --lr ${lr} --weight-decay ${weight_decay} ${extra[*]}"
reports=()
for ((seed = 0; seed < seeds; ++seed)); do
  report="${work}/seed${seed}.json"
  if ! "${launch[@]}" "${train}" --dataset "${dataset}" --epochs "${epochs}" --hidden "${hidden}" \
    --dropout "${dropout}" --lr "${lr}" --weight-decay "${weight_decay}" \
    --seed "${seed}" --report "${report}" "${extra[@]}" >"${work}/seed${seed}.log" 2>&1; then
    echo "seed ${seed}: $(basename "${train}") failed; the end of its output:" >&2
    tail -n 20 "${work}/seed${seed}.log" >&2
    exit 1
  fi
  reports+=("${report}")
  accuracy="$(tessera_json_get "${report}" metrics.test_accuracy)"
  awk -v seed="${seed}" -v a="${accuracy}" \
    'BEGIN { printf "seed %2d: test accuracy %6.2f %%\n", seed, 100 * a }'
done

"${TESSERA_PYTHON}" -c '
import json, statistics, sys
acc = [100 * json.load(open(p))["metrics"]["test_accuracy"] for p in sys.argv[1:]]
std = statistics.stdev(acc) if len(acc) > 1 else 0.0
print(f"test accuracy over {len(acc)} seeds: {statistics.mean(acc):.2f} ± {std:.2f} %")
' "${reports[@]}"
