#!/usr/bin/env bash
# Distributed training on the cores of this machine: a generated community graph (SBM, 2^S
# nodes, 16 classes, average degree 16, 90 % of edges inside a class, 128 features), GCN with
# hidden 128, partitioned once per rank count with METIS into a partition store that each rank
# loads alone. Prints, from each run's report (median epoch; max over ranks):
#   - 1 rank x 2 threads against 2 ranks x 1 thread: what distribution costs on the same cores
#     (target <= 15 % overhead);
#   - 1, 2 and 4 ranks x 1 thread with the compute / communication / halo-wait split;
#   - halo bytes per epoch against a 1D broadcast of the same layers (target >= 10x less at 4
#     ranks) and against the same run without the ghost input-feature cache.
# Ranks above the core count share cores (--oversubscribe), so their times show the split,
# not a speed-up.
#
# Usage: scripts/bench/scaling.sh [--scale S] [--no-build]
#   --scale S   2^S nodes (default 20, about 1M nodes; 16 for a quick look)
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); EPOCHS (default 10).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

tessera_parse_bench_args "$0" 20 "$@"
epochs="${EPOCHS:-10}"

tessera_bench_build "${build}"
apps="${TESSERA_BUILD_DIR}/apps"
train="${apps}/tessera-train/tessera-train"
tessera_require_programs "${train}" "${apps}/tessera-convert/tessera-convert" \
  "${apps}/tessera-partition/tessera-partition"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
nodes=$((1 << scale))
spec="sbm:nodes=${nodes},classes=16,avg-degree=16,p-in=0.9,features=128,noise=2"
tessera_log "generating ${spec} once (native format)"
"${apps}/tessera-convert/tessera-convert" --dataset "${spec}" --out "${work}/graph" >/dev/null
for parts in 1 2 4; do
  tessera_log "METIS into ${parts} parts"
  "${apps}/tessera-partition/tessera-partition" --dataset "${work}/graph" --parts "${parts}" \
    --out "${work}/store-${parts}" | tail -n 3
done

common=(--hidden 128 --epochs "${epochs}" --eval-every "${epochs}" --log-every "${epochs}")
# run NAME RANKS THREADS [EXTRA FLAGS...]: one training run, its report in ${work}/NAME.json.
run() {
  local name="$1" ranks="$2" threads="$3"
  shift 3
  tessera_log "${name}"
  if [[ "${ranks}" == serial ]]; then
    OMP_NUM_THREADS="${threads}" "${train}" --dataset "${work}/graph" --threads "${threads}" \
      "${common[@]}" --report "${work}/${name}.json" "$@" | tail -n 2
  else
    OMP_NUM_THREADS="${threads}" mpirun -np "${ranks}" --oversubscribe --bind-to none \
      "${train}" --partition-dir "${work}/store-${ranks}" --threads "${threads}" \
      "${common[@]}" --report "${work}/${name}.json" "$@" | tail -n 13
  fi
}
run serial-2t serial 2
run ranks-1 1 1
run ranks-2 2 1
run ranks-4 4 1
run ranks-2-nocache 2 1 --no-feature-cache
run ranks-4-nocache 4 1 --no-feature-cache

"${TESSERA_PYTHON}" - "${work}" "${scale}" <<'PY'
import json, sys
work, scale = sys.argv[1], sys.argv[2]
def report(name):
    return json.load(open(f"{work}/{name}.json"))
def at(r, key):
    for part in key.split("."):
        r = r[part]
    return r
mib = 1 << 20
print(f"\nGCN hidden 128 on SBM 2^{scale} nodes, 128 features (median epoch, max over ranks)")
print(f"{'run':<30} {'epoch ms':>9} {'compute':>9} {'comm':>8} {'wait':>8} {'halo MiB':>9} "
      f"{'1D MiB':>9} {'1D/halo':>8}")
serial = report("serial-2t")
print(f"{'1 rank x 2 threads':<30} {serial['timing']['epoch_ms_median']:>9.1f}")
rows = [("1 rank x 1 thread", "ranks-1"), ("2 ranks x 1 thread", "ranks-2"),
        ("4 ranks x 1 thread", "ranks-4"), ("2 ranks, no feature cache", "ranks-2-nocache"),
        ("4 ranks, no feature cache", "ranks-4-nocache")]
for label, name in rows:
    r = report(name)
    halo = at(r, "comm.halo_bytes_per_epoch")
    bcast = at(r, "comm.broadcast_1d_bytes_per_epoch")
    print(f"{label:<30} {at(r, 'timing.epoch_ms.max'):>9.1f} {at(r, 'timing.compute_ms.max'):>9.1f} "
          f"{at(r, 'timing.comm_ms.max'):>8.1f} {at(r, 'timing.wait_ms.max'):>8.1f} "
          f"{halo / mib:>9.1f} {bcast / mib:>9.1f} {bcast / halo if halo else float('inf'):>8.1f}")
two = report("ranks-2")
overhead = at(two, "timing.epoch_ms.max") / serial["timing"]["epoch_ms_median"] - 1
print(f"\n2 ranks x 1 thread vs 1 rank x 2 threads: {100 * overhead:+.1f} % (target <= 15 %)")
for p in (2, 4):
    cached = at(report(f"ranks-{p}"), "comm.halo_bytes_per_epoch")
    uncached = at(report(f"ranks-{p}-nocache"), "comm.halo_bytes_per_epoch")
    print(f"{p} ranks: the input-feature cache moves {uncached / cached:.1f}x fewer bytes "
          f"({cached / mib:.1f} vs {uncached / mib:.1f} MiB per epoch)")
four = report("ranks-4")
print(f"4 ranks: {at(four, 'comm.broadcast_1d_bytes_per_epoch') / at(four, 'comm.halo_bytes_per_epoch'):.1f}x "
      f"fewer bytes than a 1D broadcast (target >= 10x)")
PY
