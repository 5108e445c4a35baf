#!/usr/bin/env bash
# Sampled mini-batch GraphSAGE, Tessera against what users would otherwise pick, side by side on
# the same data and threads: 2 layers, hidden 128, fanouts 15,10 (seeds first), batches of 1024
# training nodes, dropout 0.5, Adam — on generated SBM graphs (128 features, 16 classes, average
# degree 16) of 100 k and 1 M nodes, at 1 and 2 threads:
#   tessera         tessera-train --mode sampled (batches sampled ahead on a thread of its own,
#                   --prefetch-batches 2: one thread beyond --threads)
#   tessera-inline  the same with --prefetch-batches 0 (each step samples its batch)
#   dgl             DGL 1.0.4's NeighborSampler + DataLoader (num_workers 0) + SAGEConv
#   pyg             PyG 2.3.1's NeighborLoader + SAGEConv, which samples with torch-sparse: PyPI
#                   has no wheel of it for Debian's torch, so torch-scatter 2.1.1 and
#                   torch-sparse 0.6.17 are built from their sources against it, once (about 20
#                   minutes on 2 cores); the column says '-' when that fails
# (scripts/bench/peer_sampled.py). Prints each one's training throughput (seed nodes per second
# over a median epoch after the first), peak RSS, and sampling alone (edges sampled per second:
# the peers' loader alone; Tessera's inline run's sampled edges per ms waiting for a batch),
# then Tessera's ratios to DGL.
#
# Usage: scripts/bench/sampled.sh [--quick] [--threads T|all] [--no-build]
#   --quick      the 100 k graph only
#   --threads T  1, 2 or all (default all)
#   --no-build   use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build), TESSERA_PEERS_VENV, WORK / KEEP=1 (keep
#   the reports and logs). Never run by the tests.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

quick=0
build=1
threads_arg=all
tessera_parse_args "$0" --quick=quick=1 --no-build=build=0 --threads=threads_arg -- "$@"
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
peer_python="$(tessera_peers_python)"
if ! "${peer_python}" -c 'import dgl' 2>/dev/null; then
  tessera_log "installing dgl 1.0.4"
  "${peer_python}" -m pip install -q dgl==1.0.4 || tessera_die "DGL 1.0.4 could not be installed"
fi
have_pyg=1
if ! "${peer_python}" -c 'import torch_sparse' 2>/dev/null &&
  ! "${peer_python}" -c 'import pyg_lib' 2>/dev/null; then
  tessera_log "building torch-scatter 2.1.1 and torch-sparse 0.6.17 against Debian's torch (once)"
  FORCE_ONLY_CPU=1 "${peer_python}" -m pip install -q --no-build-isolation --no-deps \
    --no-binary :all: torch-scatter==2.1.1 torch-sparse==0.6.17 >&2 || true
  "${peer_python}" -c 'import torch_sparse' 2>/dev/null || have_pyg=0
fi
tessera_bench_work_dir
bench="${TESSERA_ROOT}/scripts/bench"
flags=(--fanouts "15,10" --batch-size 1024 --hidden 128)

mib() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.0f", b / 1048576 }'; }
rate() { awk -v r="$1" 'BEGIN { if (r == "-") print "-"; else printf "%.0f", r }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

# tessera NAME THREADS PREFETCH EPOCHS NPZ: prints "seeds/s rss edges/s".
tessera() {
  local name="$1" threads="$2" prefetch="$3" epochs="$4" npz="$5"
  if ! OMP_NUM_THREADS="${threads}" "${train}" --dataset "npz:${npz}" --model sage \
    --mode sampled "${flags[@]}" --prefetch-batches "${prefetch}" --epochs "${epochs}" \
    --eval-every 1000 --threads "${threads}" --report "${work}/${name}.json" \
    >"${work}/${name}.log" 2>&1; then
    tail -n 20 "${work}/${name}.log" >&2
    tessera_die "tessera-train failed on ${name}"
  fi
  "${TESSERA_PYTHON}" - "${work}/${name}.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
b = r["batch"]
seeds = r["split"]["train"] / (b["epoch_ms"]["max"] / 1e3)
edges = b["sampled_edges_per_step"]["max"] / max(b["wait_ms"]["max"] / 1e3, 1e-9)
print(f'{seeds:.0f} {r["memory"]["peak_rss_bytes"]["max"]} {edges:.0f}')
EOF
}

# peer NAME FRAMEWORK THREADS EPOCHS NPZ: prints "seeds/s rss edges/s" (dashes when it failed).
peer() {
  local name="$1" framework="$2" threads="$3" epochs="$4" npz="$5"
  if OMP_NUM_THREADS="${threads}" "${peer_python}" "${bench}/peer_sampled.py" \
    --framework "${framework}" --npz "${npz}" --threads "${threads}" --fanouts 15,10 \
    --batch-size 1024 --hidden 128 --epochs "${epochs}" >"${work}/${name}.log" 2>&1; then
    tail -n 1 "${work}/${name}.log" >"${work}/${name}.json"
    echo "$(tessera_json_field "${work}/${name}.json" seeds_per_second) $(tessera_json_field "${work}/${name}.json" \
      peak_rss_bytes) $(tessera_json_field "${work}/${name}.json" sampled_edges_per_second)"
  else
    echo "warning: ${framework} failed on ${name}; the end of its output:" >&2
    tail -n 5 "${work}/${name}.log" >&2
    echo "- - -"
  fi
}

rows=()
sizes=(100000)
((quick)) || sizes+=(1000000)
for nodes in "${sizes[@]}"; do
  graph="sbm-$((nodes / 1000))k"
  spec="sbm:nodes=${nodes},classes=16,avg-degree=16,p-in=0.5,features=128,noise=2"
  if [[ -f "${work}/${graph}.npz" ]]; then # a kept WORK folder: the same spec, written whole
    tessera_log "reusing ${work}/${graph}.npz"
  else
    tessera_log "generating ${spec}"
    "${convert}" --dataset "${spec}" --out "${work}/${graph}.npz" >"${work}/${graph}-convert.log"
  fi
  epochs=$((nodes >= 1000000 ? 3 : 6))
  for threads in "${thread_counts[@]}"; do
    tessera_log "${graph}, ${threads} thread(s)"
    read -r t_seeds t_rss _ < <(tessera "${graph}-t${threads}-tessera" "${threads}" 2 "${epochs}" \
      "${work}/${graph}.npz")
    read -r i_seeds i_rss i_edges < <(tessera "${graph}-t${threads}-inline" "${threads}" 0 \
      "${epochs}" "${work}/${graph}.npz")
    read -r d_seeds d_rss d_edges < <(peer "${graph}-t${threads}-dgl" dgl "${threads}" \
      "${epochs}" "${work}/${graph}.npz")
    p_seeds=- p_rss=- p_edges=-
    if ((have_pyg)); then
      read -r p_seeds p_rss p_edges < <(peer "${graph}-t${threads}-pyg" pyg "${threads}" \
        "${epochs}" "${work}/${graph}.npz")
    fi
    rows+=("| ${graph} | ${threads} | $(rate "${t_seeds}"), $(mib "${t_rss}") MiB | $(rate "${i_seeds}"), $(mib "${i_rss}") MiB | $(rate "${d_seeds}"), $(mib "${d_rss}") MiB | $(rate "${p_seeds}"), $(mib "${p_rss}") MiB | $(ratio "${t_seeds}" "${d_seeds}")x, $(ratio "${i_seeds}" "${d_seeds}")x inline | $(ratio "${t_rss}" "${d_rss}") | $(rate "${i_edges}") / $(rate "${d_edges}") / $(rate "${p_edges}") |")
  done
done

echo
echo "Sampled GraphSAGE (fanouts 15,10, batch 1024, hidden 128): seed nodes per second over a"
echo "median epoch after the first, and peak RSS; sampling alone in edges per second."
((have_pyg)) || echo "PyG: NeighborLoader needs torch-sparse (or pyg-lib), which did not build: '-'."
echo
echo "| graph | threads | tessera | tessera inline | DGL | PyG | speed vs DGL | memory vs DGL | sampled edges/s: tessera inline / DGL / PyG |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
