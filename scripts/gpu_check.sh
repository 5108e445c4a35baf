#!/usr/bin/env bash
# The GPU check, in one call (about 5 minutes on an H200; must stay under 8): runs the CUDA
# tests, then measures and prints a short table —
#   cuSPARSE SpMM GB/s against a device-to-device copy (target >= 50 % at width >= 64),
#   epoch time on Cora and on a generated graph the size of ogbn-products (2.45M nodes, 62M
#   edges, 100 features, hidden 256, 3 layers; target < 100 ms on an H200),
#   CPU-vs-GPU loss agreement over 20 epochs (target within 1e-4 relative), and the same GPU
#   run under a device budget of 3/4 of its footprint (chunks moving every epoch; losses within
#   1e-5 of the run without a budget; epoch time, bytes moved, stall), and — where mpirun is
#   found (the lent machine has no OpenMPI today: see ../shared/GPU.md) — a 2-rank job with
#   one CUDA and one CPU rank (--device auto on one GPU) against one process (losses within
#   1e-4; its epoch time).
# Exits non-zero when a CUDA test fails or the losses disagree. Full logs go to $OUT (the
# device tool's output folder) or ./gpu-check-out.
#
# Usage: scripts/gpu_check.sh [--pack DIR | --build DIR] [--quick]
#   --pack DIR   binaries and libraries from scripts/gpu_package.sh (default <repo>/gpu-pack)
#   --build DIR  a CUDA build folder instead (on a machine with our Debian packages)
#   --quick      small graphs only (a minute; for trying the script)
# Environment: TESSERA_DATA_DIR for Cora (default <repo>/../shared/datasets or <repo>/shared/datasets).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

pack="${root}/gpu-pack"
build=""
quick=0
while (($# > 0)); do
  case "$1" in
    -h | --help)
      awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
      exit 0
      ;;
    --pack | --build)
      (($# >= 2)) || { echo "error: $1 needs a value" >&2; exit 1; }
      [[ "$1" == --pack ]] && pack="$2" || build="$2"
      shift 2
      ;;
    --quick)
      quick=1
      shift
      ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done

if [[ -n "${build}" ]]; then
  train="${build}/apps/tessera-train/tessera-train"
  tests="${build}/tests/cuda/tessera_cuda_tests"
  bench="${build}/bench/tessera-bench-cuda"
else
  train="${pack}/bin/tessera-train"
  tests="${pack}/bin/tessera_cuda_tests"
  bench="${pack}/bin/tessera-bench-cuda"
  # CUDA's libraries come from the machine's toolkit; NCCL (too big to carry) from there or from
  # the NCCL wheel that PyTorch installs.
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
  export LD_LIBRARY_PATH="${pack}/lib:/usr/local/cuda/lib64${nccl:+:${nccl}}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
fi
for program in "${train}" "${tests}" "${bench}"; do
  [[ -x "${program}" ]] || { echo "error: ${program} not found (scripts/gpu_package.sh makes it)" >&2; exit 1; }
done
out="${OUT:-${root}/gpu-check-out}"
mkdir -p "${out}"
python="$(command -v python3)"
data_dir="${TESSERA_DATA_DIR:-}"
for candidate in "${root}/../shared/datasets" "${root}/shared/datasets"; do
  [[ -z "${data_dir}" && -d "${candidate}/cora_planetoid" ]] && data_dir="${candidate}"
done
log() { echo "==> $* ($(date +%T))" >&2; }
failed=0

command -v nvidia-smi >/dev/null && nvidia-smi -L | tee "${out}/gpu.txt"
if ! "${bench}" --scale 4 --repeats 1 | grep -q '^device:'; then
  echo "error: no CUDA device visible to this process: nothing to check" >&2
  exit 1
fi

log "CUDA tests"
if ! "${tests}" --gtest_output="xml:${out}/cuda_tests.xml" >"${out}/cuda_tests.log" 2>&1; then
  failed=1
  echo "CUDA TESTS FAILED; the end of the log:" >&2
  tail -n 40 "${out}/cuda_tests.log" >&2
fi
tail -n 3 "${out}/cuda_tests.log"

log "SpMM against a device-to-device copy"
scale=20
((quick)) && scale=14
"${bench}" --scale "${scale}" | tee "${out}/bench.txt"

train_report() {  # train_report NAME FLAGS...: a tessera-train run, its report in ${out}/NAME.json
  local name="$1"
  shift
  "${train}" "$@" --report "${out}/${name}.json" >"${out}/${name}.log" 2>&1 || {
    echo "tessera-train ${name} failed:" >&2
    tail -n 20 "${out}/${name}.log" >&2
    return 1
  }
}

if [[ -n "${data_dir}" ]]; then
  log "Cora on the GPU"
  train_report cora --device cuda --dataset cora --data-dir "${data_dir}" --epochs 200 || failed=1
fi
products="sbm:nodes=2449029,classes=47,avg-degree=50.5,p-in=0.7,features=100,noise=2"
((quick)) && products="sbm:nodes=50000,classes=47,avg-degree=50.5,p-in=0.7,features=100,noise=2"
log "a products-size graph on the GPU (${products})"
train_report products --device cuda --dataset "${products}" --hidden 256 --num-layers 3 \
  --epochs 20 --eval-every 20 || failed=1

agree="sbm:nodes=100000,classes=16,avg-degree=20,p-in=0.8,features=64,noise=2"
log "CPU against GPU, 20 epochs with dropout (${agree})"
train_report agree-cpu --device cpu --dataset "${agree}" --hidden 64 --epochs 20 || failed=1
train_report agree-gpu --device cuda --dataset "${agree}" --hidden 64 --epochs 20 || failed=1
log "the same GPU run under a 160 MiB device budget (of a ~212 MiB footprint; 2 MiB chunks)"
train_report agree-budget --device cuda --dataset "${agree}" --hidden 64 --epochs 20 \
  --device-memory 160MiB --chunk-size 2MiB || failed=1

if command -v mpirun >/dev/null; then
  log "one CUDA rank and one CPU rank (--device auto on one GPU), against one process"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mixed_log="${out}/agree-mixed.log"
  if ! mpirun -np 2 --oversubscribe --bind-to none "${train}" --device auto --dataset "${agree}" \
    --hidden 64 --epochs 20 --report "${out}/agree-mixed.json" >"${mixed_log}" 2>&1; then
    echo "the mixed job failed:" >&2
    tail -n 20 "${mixed_log}" >&2
    failed=1
  fi
else
  echo "mixed CPU/GPU job skipped: no mpirun on this machine" | tee "${out}/agree-mixed.log"
fi

"${python}" - "${out}" "${failed}" <<'PY' || failed=1
import json, os, sys
out, failed = sys.argv[1], int(sys.argv[2])
def report(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None
print("\nGPU check (median epoch; losses per epoch)")
for name, label in (("cora", "Cora GCN (200 epochs)"),
                    ("products", "products-size GCN, hidden 256, 3 layers")):
    r = report(name)
    if r is None:
        print(f"{label:<44} skipped or failed")
        continue
    ms = r["timing"]["epoch_ms_median"]
    extra = f"  test accuracy {100 * r['metrics']['test_accuracy']:.2f} %" if name == "cora" else \
            f"  (target < 100 ms: {'met' if ms < 100 else 'MISSED'})"
    print(f"{label:<44} {ms:8.2f} ms{extra}")
cpu, gpu = report("agree-cpu"), report("agree-gpu")
status = 0
if cpu and gpu:
    worst = max(abs(g["loss"] - c["loss"]) / abs(c["loss"]) for c, g in zip(cpu["epochs"], gpu["epochs"]))
    ok = worst <= 1e-4
    print(f"{'CPU vs GPU loss, 20 epochs':<44} max relative difference {worst:.2e} "
          f"({'within' if ok else 'OUTSIDE'} 1e-4); CPU epoch {cpu['timing']['epoch_ms_median']:.1f} ms, "
          f"GPU epoch {gpu['timing']['epoch_ms_median']:.1f} ms")
    status = 0 if ok else 1
else:
    status = 1
budget = report("agree-budget")
if gpu and budget:
    worst = max(abs(b["loss"] - g["loss"]) / abs(g["loss"]) for g, b in zip(gpu["epochs"], budget["epochs"]))
    o = budget["memory"]["offload"]
    print(f"{'GPU under a 160 MiB budget vs without':<44} max relative loss difference {worst:.2e} "
          f"({'within' if worst <= 1e-5 else 'OUTSIDE'} 1e-5); epoch "
          f"{budget['timing']['epoch_ms_median']:.1f} ms vs {gpu['timing']['epoch_ms_median']:.1f} ms; "
          f"{o['moved_bytes'] / 2**20:.0f} MiB moved, {o['stall_s']:.2f} s stalled, peak device "
          f"{o['peak_device_bytes'] / 2**20:.0f} MiB")
    status = status if worst <= 1e-5 else 1
else:
    status = 1
mixed = report("agree-mixed")
if cpu and mixed:
    worst = max(abs(m["loss"] - c["loss"]) / abs(c["loss"]) for c, m in zip(cpu["epochs"], mixed["epochs"]))
    print(f"{'1 CUDA + 1 CPU rank vs one CPU process':<44} max relative loss difference {worst:.2e} "
          f"({'within' if worst <= 1e-4 else 'OUTSIDE'} 1e-4); epoch "
          f"{mixed['timing']['epoch_ms_median']:.1f} ms ({mixed['distributed']['communicator']})")
    status = status if worst <= 1e-4 else 1
else:
    print(f"{'1 CUDA + 1 CPU rank vs one CPU process':<44} skipped (no mpirun) or failed")
print("SpMM / copy: see the table above (bench.txt)")
sys.exit(status)
PY
if ((failed)); then
  echo "GPU CHECK FAILED (logs in ${out})" >&2
  exit 1
fi
echo "GPU check passed (logs in ${out})"
