#!/usr/bin/env bash
# What each halo exchange mode buys on a network (issue 14), one section each:
#   links     GCN (3 layers, hidden 128: the middle one exchanges 128-wide rows; 1 thread a
#             rank) on a generated community graph (SBM, 1M nodes, 8 classes, average degree
#             16, 70 % of edges inside a class, 128 features; --quick: 100k), cut by METIS into
#             2 and 4 parts (a partition store each rank loads alone), trained in shared memory
#             and over simulated links of 1, 10 and 100 Gb/s (5 µs) in every mode: exact, stale
#             (--staleness 1), skip (--halo-skip-threshold $SKIP_TAU), bf16 and int8 messages,
#             stale with bf16, and --schedule auto. Per run, from its report (median epoch, max
#             over ranks): epoch time and its ratio to exact over the same link, halo bytes per
#             epoch (all ranks) and their ratio to exact, time waiting for halos, test accuracy
#             after the epochs; each auto pick; the cost model's predicted against measured step
#             per layer.
#   accuracy  test accuracy of every mode against exact over 10 seeds at 4 ranks: Cora (Kipf &
#             Welling's settings, 200 epochs; skipped with a message without the data) and a
#             community graph where nearly every owned row is a boundary row (SBM 20k, p-in
#             0.3, hidden 32) after 100 epochs (still far from converged: a lag shows as lost
#             accuracy) and after 400: mean ± std, the per-seed gap to exact (mean and
#             largest), and the training-loss curves' gap (largest |Δloss| / loss over the
#             epochs, mean over seeds).
# Ranks above the core count share cores (--oversubscribe): the links section's epochs show
# the compute / communication split on this machine, not a cluster's speed.
#
# Usage: scripts/bench/comm.sh [--quick] [--no-build] [SECTION...]
#   SECTION     links, accuracy, or all (the default)
#   --quick     links on 100k nodes, accuracy over 3 seeds: a few minutes
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); EPOCHS (links; default 10); RANKS
#   (links; default "2 4"); MODES (links; default "exact stale skip bf16 int8 stale+bf16
#   auto", exact first); WORK (a folder to keep everything in and reuse: its graph and
#   stores are not made again); SKIP_TAU (the skip mode's threshold; default 0.02);
#   TESSERA_DATA_DIR (Cora; default <repo>/../shared/datasets when it exists). KEEP=1 keeps
#   the reports and logs.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

sections=(links accuracy)
tessera_parse_section_args "$0" "$@"
epochs="${EPOCHS:-10}"
tau="${SKIP_TAU:-0.02}"

tessera_bench_build "${build}"
apps="${TESSERA_BUILD_DIR}/apps"
train="${apps}/tessera-train/tessera-train"
tessera_require_programs "${train}" "${apps}/tessera-convert/tessera-convert" \
  "${apps}/tessera-partition/tessera-partition"

tessera_bench_work_dir

# The modes, by name: the flags that choose each.
declare -A mode_flags=(
  [exact]=""
  [stale]="--staleness 1"
  [skip]="--halo-skip-threshold ${tau}"
  [bf16]="--halo-precision bf16"
  [int8]="--halo-precision int8"
  [stale+bf16]="--staleness 1 --halo-precision bf16"
  [auto]="--schedule auto --allow-inexact stale,bf16,int8"
)
modes=(exact stale skip bf16 int8)
link_modes=("${modes[@]}" stale+bf16 auto)
if [[ -n "${MODES:-}" ]]; then
  read -r -a link_modes <<<"${MODES}"
  [[ "${link_modes[0]}" == exact ]] || tessera_die "MODES must start with exact (the reference)"
fi
read -r -a rank_counts <<<"${RANKS:-2 4}"

section_links() {
  local nodes=1000000
  ((quick)) && nodes=100000
  local spec="sbm:nodes=${nodes},classes=8,avg-degree=16,p-in=0.7,features=128"
  if [[ ! -d "${work}/graph" ]]; then
    tessera_log "generating ${spec} once (native format)"
    "${apps}/tessera-convert/tessera-convert" --dataset "${spec}" --out "${work}/graph" >/dev/null
  fi
  local parts link mode
  for parts in "${rank_counts[@]}"; do
    if [[ ! -d "${work}/store-${parts}" ]]; then
      tessera_log "METIS into ${parts} parts"
      "${apps}/tessera-partition/tessera-partition" --dataset "${work}/graph" --parts "${parts}" \
        --out "${work}/store-${parts}" | tail -n 2
    fi
    local common=(--partition-dir "${work}/store-${parts}" --hidden 128 --num-layers 3 --epochs "${epochs}"
      --eval-every "${epochs}" --log-every "${epochs}")
    tessera_log "P=${parts}: shared memory, exact"
    tessera_bench_train "links-p${parts}-shm-exact" "${parts}" "${common[@]}"
    for link in 100 10 1; do
      for mode in "${link_modes[@]}"; do
        tessera_log "P=${parts}: ${link} Gb/s, ${mode}"
        # shellcheck disable=SC2086  # the mode's flags split into words
        tessera_bench_train "links-p${parts}-${link}-${mode}" "${parts}" "${common[@]}" \
          --simulate-link "${link}:5" ${mode_flags[${mode}]}
      done
    done
  done
  "${TESSERA_PYTHON}" - "${work}" "${spec}" "${epochs}" "${tau}" "${RANKS:-2 4}" \
    "${link_modes[@]}" <<'PY'
import json, os, sys
work, spec, epochs, tau = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rank_counts, modes = [int(p) for p in sys.argv[5].split()], sys.argv[6:]
def report(name):
    return json.load(open(f"{work}/{name}.json"))
def at(r, key):
    for part in key.split("."):
        r = r[part]
    return r
mib = 1 << 20
print(f"\n### Halo exchange modes over simulated links: GCN 3 layers, hidden 128, on `{spec}`, "
      f"{epochs} epochs, 1 thread a rank (skip: τ = {tau})\n")
print("| ranks | link | mode | epoch ms | × exact | halo MiB/epoch | × exact | wait ms | "
      "test acc. |")
print("|---|---|---|---|---|---|---|---|---|")
for parts in rank_counts:
    shm = report(f"links-p{parts}-shm-exact")
    epoch, wait = at(shm, "timing.epoch_ms.max"), at(shm, "timing.wait_ms.max")
    print(f"| {parts} | shared memory | exact | {epoch:.0f} | | "
          f"{at(shm, 'comm.halo_bytes_per_epoch') / mib:.1f} | | {wait:.1f} | "
          f"{100 * at(shm, 'metrics.final_test_accuracy'):.2f} % |")
    for link in (100, 10, 1):
        exact = report(f"links-p{parts}-{link}-exact")
        for mode in modes:
            r = report(f"links-p{parts}-{link}-{mode}")
            e = at(r, "timing.epoch_ms.max")
            b = at(r, "comm.halo_bytes_per_epoch")
            print(f"| {parts} | {link} Gb/s | {mode} | {e:.0f} | "
                  f"{e / at(exact, 'timing.epoch_ms.max'):.2f} | {b / mib:.1f} | "
                  f"{b / at(exact, 'comm.halo_bytes_per_epoch'):.3f} | "
                  f"{at(r, 'timing.wait_ms.max'):.1f} | "
                  f"{100 * at(r, 'metrics.final_test_accuracy'):.2f} % |")
    print(f"\nP={parts}, shared memory: exact mode waits {wait:.1f} ms for halos, "
          f"{100 * wait / epoch:.1f} % of the {epoch:.0f} ms epoch (goal <= 10 %)\n")
    for link in (100, 10, 1) if "auto" in modes else ():
        r = report(f"links-p{parts}-{link}-auto")
        picks = r["distributed"].get("layer_exchange", {})
        plan = "; ".join(f"{conv}: {picks[conv]}" for conv in sorted(picks))
        print(f"P={parts}, {link} Gb/s: --schedule auto picked {plan}")
# The cost model: each GCN layer's predicted step against its measured one (slowest rank).
print("\n### The cost model: predicted against measured step per layer (exact mode; slowest "
      "rank of each)\n")
print("| ranks | link | layer | predicted ms | measured ms | error |")
print("|---|---|---|---|---|---|")
for parts in rank_counts:
    for link, name in (("shared memory", f"links-p{parts}-shm-exact"),
                       ("10 Gb/s", f"links-p{parts}-10-exact")):
        r = report(name)
        layers = r.get("schedule", {}).get("layer_predicted_ms", {})
        for conv in sorted(layers):
            predicted = max(layers[conv])
            measured = max(r["schedule"]["layer_measured_ms"][conv])
            print(f"| {parts} | {link} | {conv} | {predicted:.1f} | {measured:.1f} | "
                  f"{100 * (predicted / measured - 1):+.0f} % |")
PY
}

section_accuracy() {
  local seeds=10
  ((quick)) && seeds=3
  local data_dir
  data_dir="$(tessera_data_dir)"
  local datasets=(community-100 community-400)
  if [[ -n "${data_dir}" && -d "${data_dir}/cora_planetoid" ]]; then
    datasets=(cora community-100 community-400)
  else
    echo "accuracy: Cora skipped (no ${data_dir:-../shared/datasets}/cora_planetoid)"
  fi
  local dataset mode seed
  for dataset in "${datasets[@]}"; do
    local flags
    if [[ "${dataset}" == cora ]]; then
      flags=(--dataset cora --data-dir "${data_dir}" --epochs 200 --hidden 16)
    else
      flags=(--dataset "sbm:nodes=20000,classes=8,avg-degree=10,p-in=0.3,features=32,noise=4"
        --epochs "${dataset#community-}" --hidden 32)
    fi
    for mode in "${modes[@]}"; do
      tessera_log "${dataset}, 4 ranks, ${mode}: ${seeds} seeds"
      for ((seed = 0; seed < seeds; ++seed)); do
        # shellcheck disable=SC2086  # the mode's flags split into words
        tessera_bench_train "acc-${dataset}-${mode}-${seed}" 4 "${flags[@]}" --seed "${seed}" \
          --log-every 1000 ${mode_flags[${mode}]}
      done
    done
  done
  "${TESSERA_PYTHON}" - "${work}" "${seeds}" "${tau}" "${datasets[@]}" -- "${modes[@]}" <<'PY'
import json, statistics, sys
work, seeds, tau = sys.argv[1], int(sys.argv[2]), sys.argv[3]
split = sys.argv.index("--")
datasets, modes = sys.argv[4:split], sys.argv[split + 1:]
def report(dataset, mode, seed):
    return json.load(open(f"{work}/acc-{dataset}-{mode}-{seed}.json"))
print(f"\n### Accuracy of the exchange modes, 4 ranks, seeds 0-{seeds - 1} (skip: τ = {tau})\n")
print("| dataset | mode | test accuracy | gap to exact (mean) | largest gap | loss-curve gap |")
print("|---|---|---|---|---|---|")
for dataset in datasets:
    exact = [report(dataset, "exact", s) for s in range(seeds)]
    for mode in modes:
        runs = [report(dataset, mode, s) for s in range(seeds)]
        acc = [100 * r["metrics"]["test_accuracy"] for r in runs]
        gaps = [a - 100 * e["metrics"]["test_accuracy"] for a, e in zip(acc, exact)]
        curve = []
        for r, e in zip(runs, exact):
            pairs = zip(r["epochs"], e["epochs"])
            curve.append(max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in pairs))
        std = statistics.stdev(acc) if len(acc) > 1 else 0.0
        print(f"| {dataset} | {mode} | {statistics.mean(acc):.2f} ± {std:.2f} % | "
              f"{statistics.mean(gaps):+.2f} | {max(gaps, key=abs):+.2f} | "
              f"{100 * statistics.mean(curve):.2f} % |")
PY
}

for s in "${chosen[@]}"; do
  "section_${s}"
done
