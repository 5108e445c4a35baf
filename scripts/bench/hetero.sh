#!/usr/bin/env bash
# Heterogeneous ranks (issue 15): a GCN (2 layers, hidden 32, 1 thread a rank) on a generated
# community graph (SBM, 1M nodes, 8 classes, average degree 10, 70 % of edges inside a class, 64
# features; --quick: 100k) at 2 and 4 ranks, the last rank simulated at 0.25 and at 0.5 of its
# speed (--simulate-rank-speed: its training compute sleeps the difference). Per case:
#   none      equal parts: every epoch waits for the slow rank
#   given     parts cut for the true speeds (--balance given --rank-speeds), then rebalanced
#   measured  parts cut for the speeds the ranks' cost model measures at start (--balance
#             measured), then rebalanced
# and the ideal: the epoch of all ranks at full speed × P / (sum of the speeds) — the total work
# over the total speed. Per run, from its report: the median epoch after the last rebalance (or
# of the run, without one), its ratio to the ideal (goal <= 1.15 balanced), the rebalances
# (after which epoch, imbalance before → after, rows moved) and the test accuracy.
# Ranks above the core count share cores (--oversubscribe); a sleeping slow rank leaves its core
# to the others, so on a machine with fewer cores than ranks a balanced job can beat the ideal.
#
# Usage: scripts/bench/hetero.sh [--quick] [--no-build]
#   --quick     100k nodes: a few minutes
#   --no-build  use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); EPOCHS (default 30); RANKS (default
#   "2 4"); FACTORS (the slow rank's speeds; default "0.25 0.5"); WORK (a folder to keep
#   everything in and reuse: its graph is not made again). KEEP=1 keeps the reports and logs.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

sections=(balance)
tessera_parse_section_args "$0" "$@"
epochs="${EPOCHS:-30}"
read -r -a rank_counts <<<"${RANKS:-2 4}"
read -r -a factors <<<"${FACTORS:-0.25 0.5}"

tessera_bench_build "${build}"
apps="${TESSERA_BUILD_DIR}/apps"
train="${apps}/tessera-train/tessera-train"
tessera_require_programs "${train}" "${apps}/tessera-convert/tessera-convert"

tessera_bench_work_dir

# "1,1,1,F": every rank at full speed but the last.
speeds_of() {
  local ranks="$1" factor="$2" text="" r
  for ((r = 0; r < ranks - 1; r++)); do text+="1,"; done
  echo "${text}${factor}"
}

section_balance() {
  local nodes=1000000
  ((quick)) && nodes=100000
  local spec="sbm:nodes=${nodes},classes=8,avg-degree=10,p-in=0.7,features=64"
  if [[ ! -d "${work}/graph" ]]; then
    tessera_log "generating ${spec} once (native format)"
    "${apps}/tessera-convert/tessera-convert" --dataset "${spec}" --out "${work}/graph" >/dev/null
  fi
  local common=(--dataset "${work}/graph" --hidden 32 --epochs "${epochs}" --eval-every "${epochs}"
    --log-every "${epochs}")
  local ranks factor slow
  for ranks in "${rank_counts[@]}"; do
    tessera_log "P=${ranks}: every rank at full speed"
    tessera_bench_train "p${ranks}-uniform" "${ranks}" "${common[@]}"
    for factor in "${factors[@]}"; do
      slow=(--simulate-rank-speed "$((ranks - 1)):${factor}")
      tessera_log "P=${ranks}, rank $((ranks - 1)) at ${factor}: equal parts"
      tessera_bench_train "p${ranks}-${factor}-none" "${ranks}" "${common[@]}" "${slow[@]}"
      tessera_log "P=${ranks}, rank $((ranks - 1)) at ${factor}: --balance given"
      tessera_bench_train "p${ranks}-${factor}-given" "${ranks}" "${common[@]}" "${slow[@]}" \
        --balance given --rank-speeds "$(speeds_of "${ranks}" "${factor}")"
      tessera_log "P=${ranks}, rank $((ranks - 1)) at ${factor}: --balance measured"
      tessera_bench_train "p${ranks}-${factor}-measured" "${ranks}" "${common[@]}" "${slow[@]}" \
        --balance measured
    done
  done
  "${TESSERA_PYTHON}" - "${work}" "${spec}" "${epochs}" "${RANKS:-2 4}" "${factors[@]}" <<'PY'
import json, sys
work, spec, epochs = sys.argv[1], sys.argv[2], sys.argv[3]
rank_counts, factors = [int(p) for p in sys.argv[4].split()], [float(f) for f in sys.argv[5:]]
def report(name):
    return json.load(open(f"{work}/{name}.json"))
def move_text(m):
    after = f"{m['imbalance_after']:.2f}" if m["imbalance_after"] > 0 else "(not measured)"
    return f"{m['epoch']:.0f}: {m['imbalance_before']:.2f} → {after}, {m['rows_moved']:.0f}"
def epoch_ms(r):
    balanced = r["timing"].get("balanced_epoch_ms", 0.0)
    return balanced if balanced > 0 else r["timing"]["epoch_ms_median"]
print(f"\n### Heterogeneous ranks: GCN 2 layers, hidden 32, on `{spec}`, {epochs} epochs, "
      f"1 thread a rank; the last rank simulated slower\n")
print("| ranks | slow rank | balance | first cut's speeds | epoch ms | × ideal | rebalances "
      "(epoch: imbalance before → after, rows moved) | test acc. |")
print("|---|---|---|---|---|---|---|---|")
for ranks in rank_counts:
    uniform = report(f"p{ranks}-uniform")
    full = uniform["timing"]["epoch_ms_median"]
    print(f"| {ranks} | 1 (all equal) | none | | {full:.0f} | | | "
          f"{100 * uniform['metrics']['test_accuracy']:.2f} % |")
    for factor in factors:
        ideal = full * ranks / (ranks - 1 + factor)
        for balance in ("none", "given", "measured"):
            r = report(f"p{ranks}-{factor:g}-{balance}")
            e = epoch_ms(r)
            speeds = ",".join(f"{s:.2f}" for s in r["distributed"].get("rank_speeds", []))
            moves = "; ".join(move_text(m) for m in r.get("rebalances", []))
            print(f"| {ranks} | {factor:g} | {balance} | {speeds} | {e:.0f} | {e / ideal:.2f} | "
                  f"{moves} | {100 * r['metrics']['test_accuracy']:.2f} % |")
        print(f"| {ranks} | {factor:g} | ideal | | {ideal:.0f} | 1.00 | | |")
PY
}

for section in "${chosen[@]}"; do
  "section_${section}"
done
