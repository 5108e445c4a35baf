#!/usr/bin/env bash
# Cost of the chunk engine's offload (issue 13), one section per trainer:
#   gnn  tessera-train, GCN (2 layers, hidden 128) on RMAT scale 20 (1M nodes, 32M nonzeros,
#        128 features): the footprint (features, Â, activations, gradients, weights, Adam state)
#        measured under a budget that holds it all, then epoch time against device budgets of
#        1, 1/2, 1/4 and 1/8 of it (host tier unbounded): step time of the steady epoch against
#        the run without a manager, bytes moved and time stalled, and any budget the engine
#        refuses with its message; farthest-next-use against LRU at 1/4; per-epoch losses
#        against the unbudgeted run (identical while layers run whole, within 1e-5 once row
#        blocks and tiles of Â change the summation order).
#   products  a graph the size of ogbn-products (RMAT scale 21, edge factor 30: 2M nodes, 118M
#        nonzeros, 100 features, 47 classes) with OGB's full-batch GCN shape (3 layers, hidden
#        256), which does not fit this machine's 24 GB, under --device-memory 6GiB --host-memory
#        6GiB with a disk tier: per-epoch step time, bytes moved per tier, stall, peak RSS
#        (about 4 minutes on 2 cores; --quick: scale 17 under 64 + 64 MiB in 2 MiB chunks).
#   mlp  tessera-mlp on generated blobs (4096 features, 16 classes):
#        a. a model whose parameters + Adam state (m, v) are >= 4x a 1 GiB device budget, trained
#           under that budget (host tier unbounded) and without one in the same run: median step
#           time of the steady epoch (ratio), bytes moved and time stalled per step, peak RSS;
#           and the next width up, which the budget refuses (why the model is built deep, not
#           wide);
#        b. bounded memory on the CPU backend: the same model with --device-memory D
#           --host-memory H --offload-dir (footprint >= 4x D + H): peak RSS against D + H
#           (goal: <= D + H + 15 % + a fixed overhead), the overhead split into the process
#           without a model, the data set and the batch buffers (each measured or computed),
#           and the RSS split at its peak (anonymous: heap and host tier; shmem: device slots).
# Each part prints a Markdown table with the commands that made it. Steady-state figures come
# from epoch 3 of 4: epoch 1 allocates, epoch 2 records the access trace, epoch 3 evicts by
# farthest next use and does not evaluate (only epoch 4 does).
#
# Usage: scripts/bench/offload.sh [--quick] [--no-build] [SECTION...]
#   SECTION     gnn, products, mlp, or all (the default): which sections to run, in order
#   --quick     gnn: RMAT scale 16 in 4 MiB chunks; mlp: a 4x smaller model under a 256 MiB
#               budget (chunks of 16 MiB): a few minutes instead of about 20 on 2 cores
#   --no-build  use the existing build instead of installing deps and building tessera-mlp
# Environment: TESSERA_BUILD_DIR (default <repo>/build), THREADS (default 0: all cores),
#   OFFLOAD_DIR (the disk tier's folder; default a temporary folder under /tmp). The reports,
#   logs and RSS samples stay in a temporary folder named at the end when KEEP=1.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
tessera_fast_blas_env

# The one list of sections: `all` runs these in this order; each is the function section_NAME,
# and needs the build targets in targets_NAME.
sections=(gnn products mlp)
# shellcheck disable=SC2034  # read through a nameref below
targets_gnn=(tessera-train)
# shellcheck disable=SC2034
targets_products=(tessera-train)
# shellcheck disable=SC2034
targets_mlp=(tessera-mlp)

tessera_parse_section_args "$0" "$@"
threads="${THREADS:-0}"

if ((build)); then
  tessera_install_deps
  targets=()
  for s in "${chosen[@]}"; do
    declare -n section_targets="targets_${s}"
    targets+=("${section_targets[@]}")
    unset -n section_targets
  done
  # Only what the sections run is built; an existing build folder keeps its configuration.
  if [[ ! -f "${TESSERA_BUILD_DIR}/CMakeCache.txt" ]]; then
    tessera_log "configuring ${TESSERA_BUILD_DIR}"
    cmake -S "${TESSERA_ROOT}" -B "${TESSERA_BUILD_DIR}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTESSERA_NATIVE_ARCH=ON >/dev/null
  fi
  tessera_log "building ${targets[*]} in ${TESSERA_BUILD_DIR}"
  cmake --build "${TESSERA_BUILD_DIR}" --parallel "$(nproc)" --target "${targets[@]}"
fi

work="$(mktemp -d /tmp/tessera-offload-bench.XXXXXX)"
offload_dir="${OFFLOAD_DIR:-${work}/disk}"
mkdir -p "${offload_dir}"
# The folder goes at exit unless KEEP=1 or a run failed (its log is there).
cleanup() {
  local status=$?
  if ((status == 0)) && [[ "${KEEP:-0}" != 1 ]]; then
    rm -rf "${work}"
  else
    tessera_log "reports, logs and RSS samples kept in ${work}"
  fi
}
trap cleanup EXIT

# measure NAME PROGRAM ARGS...: runs the program with its report in ${work}/NAME.json, its
# output in NAME.log (the last lines echoed), the command line in NAME.cmd, and NAME.rss: its
# resident set sampled every 20 ms from /proc (the largest sample, split into anonymous, shmem
# and file pages; the exact peak, VmHWM, is the report's memory.peak_rss_bytes). A run that
# fails leaves its error in NAME.err and ends the script, unless --may-fail is given first.
cat >"${work}/sample_rss.py" <<'PY'
import json, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
keys = ("VmRSS", "RssAnon", "RssShmem", "RssFile", "VmHWM")
child = subprocess.Popen(argv)
best = {k: 0 for k in keys}
while child.poll() is None:
    try:
        with open(f"/proc/{child.pid}/status") as f:
            now = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f if l.split(":")[0] in keys}
        if now.get("VmRSS", 0) > best["VmRSS"]:
            best = {k: now.get(k, 0) for k in keys}
        best["VmHWM"] = max(best["VmHWM"], now.get("VmHWM", 0))
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        pass
    time.sleep(0.02)
json.dump(best, open(out, "w"))
sys.exit(child.returncode)
PY
measure() {
  local may_fail=0
  if [[ "$1" == --may-fail ]]; then
    may_fail=1
    shift
  fi
  local name="$1"
  shift
  local shown=("$@")
  shown[0]="$(basename "$1")"
  echo "${shown[*]}" >"${work}/${name}.cmd"
  tessera_log "${name}: ${shown[*]}"
  if "${TESSERA_PYTHON}" "${work}/sample_rss.py" "${work}/${name}.rss" "$@" \
    --report "${work}/${name}.json" >"${work}/${name}.log" 2>"${work}/${name}.err"; then
    tail -n 2 "${work}/${name}.log" >&2
  else
    tail -n 1 "${work}/${name}.err" >&2
    ((may_fail)) || tessera_die "${name} failed (its output: ${work}/${name}.log, .err)"
  fi
}

section_gnn() {
  local train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
  tessera_require_programs "${train}"
  local scale chunk
  if ((quick)); then
    scale=16 chunk=4MiB
  else
    scale=20 chunk=64MiB
  fi
  local common=(--dataset "rmat:scale=${scale},edge-factor=16,features=128,classes=16"
    --hidden 128 --threads "${threads}" --seed 0 --epochs 4 --eval-every 4)
  # The footprint: what the manager holds when its budget holds everything (64 GiB of slots are
  # address space and a sparse memory file until chunks are mapped).
  measure gnn-unbudgeted "${train}" "${common[@]}"
  measure gnn-footprint "${train}" "${common[@]}" --device-memory 64GiB --chunk-size "${chunk}"
  local footprint
  footprint="$("${TESSERA_PYTHON}" -c 'import json, sys
print(json.load(open(sys.argv[1]))["memory"]["offload"]["peak_tensor_bytes"])' \
    "${work}/gnn-footprint.json")"
  local fraction budget names=()
  for fraction in 1 0.5 0.25 0.125; do
    budget="$("${TESSERA_PYTHON}" -c 'import sys, math
f, fp, c = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
chunk = int(c[:-3]) << {"KiB": 10, "MiB": 20, "GiB": 30}[c[-3:]]
print(math.ceil(f * fp / chunk) * chunk)' "${fraction}" "${footprint}" "${chunk}")"
    measure --may-fail "gnn-budget-${fraction}" "${train}" "${common[@]}" \
      --device-memory "${budget}" --chunk-size "${chunk}"
    names+=("gnn-budget-${fraction}")
  done
  # LRU at a quarter of the footprint (or the smallest budget that trained).
  local smallest=""
  for name in "${names[@]}"; do [[ -s "${work}/${name}.json" ]] && smallest="${name}"; done
  [[ -s "${work}/gnn-budget-0.25.json" ]] && smallest=gnn-budget-0.25
  if [[ -n "${smallest}" ]]; then
    local args
    read -r -a args <"${work}/${smallest}.cmd"
    measure gnn-lru "${train}" "${args[@]:1}" --eviction-policy lru
  fi

  "${TESSERA_PYTHON}" - "${work}" "${smallest}" "${names[@]}" <<'PY'
import json, sys
work, smallest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
GiB, MiB = 1 << 30, 1 << 20
def load(name):
    try:
        r = json.load(open(f"{work}/{name}.json"))
    except (FileNotFoundError, json.JSONDecodeError):
        r = None
    return r, open(f"{work}/{name}.cmd").read().strip()
def size(b):
    return f"{b / GiB:.2f} GiB" if abs(b) >= GiB else f"{b / MiB:.1f} MiB"
def steady(r):  # epoch 3 of 4: trace recorded, farthest-next-use evicting, nothing evaluated
    e = r["epochs"][2]
    return e["step_ms"], e["moved_bytes"], e["stall_ms"]
plain, plain_cmd = load("gnn-unbudgeted")
full, _ = load("gnn-footprint")
footprint = full["memory"]["offload"]["peak_tensor_bytes"]
d = plain["dataset"]
print(f"\n### GCN on {d['name']} ({d['nodes']:,} nodes, {d['edges']:,} edges, "
      f"{d['features']} features), hidden 128, {plain['threads']} threads: footprint "
      f"{size(footprint)}, chunks of {size(full['memory']['chunk_bytes'])}\n")
p_ms = steady(plain)[0]
print("| device budget | of footprint | step (steady epoch) | vs no manager | moved per epoch | "
      "stalled | losses vs unbudgeted | command |")
print("|---|---|---|---|---|---|---|---|")
print(f"| no manager | - | {p_ms:.0f} ms | 1.00x | - | - | - | `{plain_cmd}` |")
losses = [e["loss"] for e in plain["epochs"]]
for name in names + (["gnn-lru"] if smallest else []):
    r, cmd = load(name)
    budget = int(cmd.split("--device-memory ")[1].split()[0])
    label = size(budget) + (" (LRU)" if name == "gnn-lru" else "")
    if r is None:
        err = open(f"{work}/{name}.err").read().strip().splitlines()
        why = err[-1].replace("[rank 0] error: ", "") if err else "(no message)"
        print(f"| {label} | {budget / footprint:.3f} | refused: {why} | | | | | `{cmd}` |")
        continue
    ms, moved, stall = steady(r)
    mine = [e["loss"] for e in r["epochs"]]
    worst = max(abs(a - b) / abs(a) for a, b in zip(losses, mine))
    same = "identical" if mine == losses else f"max relative difference {worst:.1e}"
    print(f"| {label} | {budget / footprint:.3f} | {ms:.0f} ms | {ms / p_ms:.2f}x | "
          f"{size(moved)} | {stall:.0f} ms | {same} | `{cmd}` |")
PY
}

section_products() {
  local train="${TESSERA_BUILD_DIR}/apps/tessera-train/tessera-train"
  tessera_require_programs "${train}"
  local scale=21 device=6GiB host=6GiB chunk=64MiB
  ((quick)) && scale=17 device=64MiB host=64MiB chunk=2MiB
  measure products "${train}" --dataset "rmat:scale=${scale},edge-factor=30,features=100,classes=47" \
    --hidden 256 --num-layers 3 --epochs 3 --eval-every 3 --threads "${threads}" \
    --device-memory "${device}" --host-memory "${host}" --offload-dir "${offload_dir}" \
    --chunk-size "${chunk}"
  "${TESSERA_PYTHON}" - "${work}" <<'PY'
import json, sys
work = sys.argv[1]
r = json.load(open(f"{work}/products.json"))
cmd = open(f"{work}/products.cmd").read().strip()
GiB = 1 << 30
m, o = r["memory"], r["memory"]["offload"]
d = r["dataset"]
print(f"\n### {d['name']}: {d['nodes']:,} nodes, {d['edges']:,} edges, GCN 3 layers hidden 256, "
      f"{r['threads']} threads\n")
print(f"Footprint {o['peak_tensor_bytes'] / GiB:.1f} GiB under a device budget of "
      f"{m['device_budget_bytes'] / GiB:.1f} GiB, a host tier of {m['host_budget_bytes'] / GiB:.1f} "
      f"GiB and a disk tier (peak {o['peak_disk_bytes'] / GiB:.1f} GiB); peak RSS "
      f"{m['peak_rss_bytes']['max'] / GiB:.1f} GiB. `{cmd}`\n")
print("| epoch | step | moved | stalled | note |")
print("|---|---|---|---|---|")
notes = {1: "allocates, builds the tiles of Â", 2: "records the access trace",
         3: "farthest-next-use; also evaluates (its moves counted)"}
for e in r["epochs"]:
    print(f"| {int(e['epoch'])} | {e['step_ms'] / 1e3:.1f} s | {e['moved_bytes'] / GiB:.1f} GiB | "
          f"{e['stall_ms'] / 1e3:.1f} s | {notes.get(e['epoch'], '')} |")
print(f"\nIn all: {o['host_to_device_bytes'] / GiB:.1f} GiB host->device, "
      f"{o['device_to_host_bytes'] / GiB:.1f} GiB device->host, {o['host_to_disk_bytes'] / GiB:.1f} "
      f"GiB to disk, {o['disk_to_host_bytes'] / GiB:.1f} GiB back.")
PY
}

section_mlp() {
  local mlp="${TESSERA_BUILD_DIR}/apps/tessera-mlp/tessera-mlp"
  tessera_require_programs "${mlp}"
  # Sizes: parameters + Adam >= 4x the device budget; one layer's scope (weight, its gradient,
  # the activations) must fit the budget, so the model is deep rather than wide.
  local features hidden depth budget chunk host samples batch wider
  if ((quick)); then
    features=1024 hidden=3072 depth=7 budget=128MiB chunk=8MiB host=32MiB wider=4608
  else
    features=4096 hidden=8192 depth=6 budget=1GiB chunk=64MiB host=256MiB wider=12288
  fi
  samples=64 batch=32 # 51 training samples: 2 steps per epoch
  local layers="${features}" wide="${features}-${wider}-${wider}-16" i
  for ((i = 0; i < depth; ++i)); do layers+="-${hidden}"; done
  layers+="-16"
  local data="blobs:samples=${samples},features=${features},classes=16,seed=1"
  # A learning rate these widths do not diverge at (the default 0.01 does, without changing the
  # cost of a step).
  local common=(--dataset "${data}" --batch-size "${batch}" --lr 1e-5 --dropout 0
    --threads "${threads}" --seed 0)
  local epochs=(--epochs 4 --eval-every 4) # only the last epoch evaluates

  measure mlp-unbudgeted "${mlp}" "${common[@]}" "${epochs[@]}" --layers "${layers}"
  measure mlp-budget "${mlp}" "${common[@]}" "${epochs[@]}" --layers "${layers}" \
    --device-memory "${budget}" --chunk-size "${chunk}"
  measure --may-fail mlp-wider "${mlp}" "${common[@]}" --epochs 1 --layers "${wide}" \
    --device-memory "${budget}" --chunk-size "${chunk}"
  measure mlp-bounded "${mlp}" "${common[@]}" "${epochs[@]}" --layers "${layers}" \
    --device-memory "${budget}" --chunk-size "${chunk}" --host-memory "${host}" \
    --offload-dir "${offload_dir}"
  # The process without a model (no data to speak of), then with the data set and its batch
  # buffers but a model of a few KiB: what the bounded run holds besides its tiers.
  measure mlp-process "${mlp}" --dataset "blobs:samples=${samples},features=16,classes=16,seed=1" \
    --layers 16-16 --batch-size "${batch}" --epochs 1 --threads "${threads}"
  measure mlp-data "${mlp}" "${common[@]}" --epochs 1 --layers "${features}-16"

  "${TESSERA_PYTHON}" - "${work}" "${budget}" "${host}" "${features}" "${samples}" "${batch}" \
    <<'PY'
import json, math, sys
work, budget_text, host_text = sys.argv[1:4]
features, samples, batch = map(int, sys.argv[4:7])
GiB, MiB = 1 << 30, 1 << 20
def load(name):
    try:
        r = json.load(open(f"{work}/{name}.json"))
    except FileNotFoundError:
        r = None
    return r, json.load(open(f"{work}/{name}.rss")), open(f"{work}/{name}.cmd").read().strip()
def size(b):
    return f"{b / GiB:.2f} GiB" if abs(b) >= GiB else f"{b / MiB:.1f} MiB"
def steady(r):
    # Epoch 3 of 4: the trace is recorded, eviction is farthest-next-use, nothing is evaluated.
    e = r["epochs"][2]
    steps = r["timing"]["steps_per_epoch"]
    return e["step_ms"], e["moved_bytes"] / steps, e["stall_ms"] / steps
def code(cmd):
    return "`" + cmd + "`"

free, free_rss, free_cmd = load("mlp-unbudgeted")
cap, cap_rss, cap_cmd = load("mlp-budget")
param_adam = 3 * 4 * free["model"]["parameters"]
budget = cap["memory"]["device_budget_bytes"]
footprint = free["memory"]["model_bytes"] + free["memory"]["optimizer_bytes"]
print(f"\n### a. MLP {'-'.join(str(int(s)) for s in free['config']['layer_sizes'])} under a "
      f"{size(budget)} device budget (host tier unbounded)\n")
print(f"{free['model']['parameters'] / 1e6:.0f} M parameters; parameters + Adam (m, v) "
      f"{size(param_adam)} = {param_adam / budget:.1f}x the budget; with gradients and "
      f"activations {size(footprint)}. Batch {free['config']['batch_size']}, "
      f"{free['timing']['steps_per_epoch']} steps per epoch, {free['threads']} threads, BLAS "
      f"{free['blas_core']}. Steady epoch (3 of 4).\n")
print("| run | step (median) | vs unbudgeted | moved per step | stalled per step | moved per "
      "step, epoch 2 (LRU) | peak RSS | final loss | command |")
print("|---|---|---|---|---|---|---|---|---|")
f_ms, _, _ = steady(free)
for label, r, cmd in (("unbudgeted", free, free_cmd), (f"budget {size(budget)}", cap, cap_cmd)):
    ms, moved, stall = steady(r)
    lru = r["epochs"][1]["moved_bytes"] / r["timing"]["steps_per_epoch"]
    print(f"| {label} | {ms / 1e3:.2f} s | {ms / f_ms:.2f}x | {size(moved)} | {stall / 1e3:.2f} s "
          f"| {size(lru)} | {size(r['memory']['peak_rss_bytes'])} | "
          f"{r['metrics']['final_loss']:.6f} | {code(cmd)} |")
same = [e["loss"] for e in free["epochs"]] == [e["loss"] for e in cap["epochs"]]
print(f"\nPer-epoch losses budgeted == unbudgeted: {'identical' if same else 'DIFFERENT'}.")
wide, _, wide_cmd = load("mlp-wider")
if wide is None:
    err = open(f"{work}/mlp-wider.err").read().strip().splitlines()
    print(f"The next width up is refused by the budget: {code(wide_cmd)} → "
          f"\"{err[-1] if err else '(no message)'}\"")
else:
    print(f"The next width up also trains under the budget: {code(wide_cmd)} "
          f"({wide['timing']['step_ms_median'] / 1e3:.2f} s per step).")

bound, bound_rss, bound_cmd = load("mlp-bounded")
proc, proc_rss, proc_cmd = load("mlp-process")
data, data_rss, data_cmd = load("mlp-data")
D, H = bound["memory"]["device_budget_bytes"], bound["memory"]["host_budget_bytes"]
peak = bound["memory"]["peak_rss_bytes"]
o = bound["memory"]["offload"]
base = proc["memory"]["peak_rss_bytes"]
with_data = data["memory"]["peak_rss_bytes"]
dataset_bytes = samples * features * 4 + samples * 4          # features [n, F] + labels
# input [batch, F], d_logits [batch, 16], row ids, labels, global ids (device and host copies)
batch_bytes = batch * features * 4 + batch * 16 * 4 + batch * (4 + 4 + 8 + 4 + 4 + 8)
fixed = with_data                                             # what the run holds besides D, H
limit = D + H + 0.15 * (D + H) + fixed
print(f"\n### b. Bounded memory: {size(footprint)} of model on the CPU backend, device {size(D)} "
      f"+ host {size(H)} + disk ({size(footprint)} = {footprint / (D + H):.1f}x D + H)\n")
print("| run | peak RSS (VmHWM) | largest sample: anon / shmem / file | note | command |")
print("|---|---|---|---|---|")
def row(label, r, rss, cmd, note):
    print(f"| {label} | {size(r['memory']['peak_rss_bytes'])} | {size(rss['RssAnon'])} / "
          f"{size(rss['RssShmem'])} / {size(rss['RssFile'])} | {note} | {code(cmd)} |")
row("bounded run", bound, bound_rss, bound_cmd,
    f"moved {size(o['moved_bytes'])} in all ({size(o['host_to_disk_bytes'])} to disk, "
    f"{size(o['disk_to_host_bytes'])} back); peak device {size(o['peak_device_bytes'])}, host "
    f"{size(o['peak_host_bytes'])}; {steady(bound)[0] / 1e3:.2f} s per step")
row("process, no model", proc, proc_rss, proc_cmd, "libraries, OpenMP and OpenBLAS buffers")
row("+ data set, batch buffers", data, data_rss, data_cmd,
    f"data set {size(dataset_bytes)}, batch buffers {size(batch_bytes)} (computed)")
over = peak - D - H
sizes = bound["config"]["layer_sizes"]
largest = max(4 * int(a) * int(b) for a, b in zip(sizes, sizes[1:]))
print(f"\nPeak RSS {size(peak)} against D + H = {size(D + H)}: overhead {size(over)} = process "
      f"{size(base)} + data set and batch buffers {size(with_data - base)} + unattributed "
      f"{size(over - with_data)} (the largest weight tensor is {size(largest)}).")
print(f"Goal peak RSS <= D + H + 15 % + fixed overhead ({size(fixed)}, the run without a model) "
      f"= {size(limit)}: {'met' if peak <= limit else 'NOT met'} "
      f"(by {size(abs(limit - peak))}).")
PY
}

for s in "${chosen[@]}"; do
  "section_${s}"
done
