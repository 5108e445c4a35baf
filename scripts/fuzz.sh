#!/usr/bin/env bash
# Fuzzes Tessera's loaders: builds the libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan,
# CUDA off, in the sanitizer build folder that scripts/test.sh shares) and runs each for N
# seconds. A crash, sanitizer report, uncaught non-Tessera exception, leak, input slower than
# 10 s or RSS above 2 GB is a finding: its reproducer is kept and the script exits 1.
#
# Usage: scripts/fuzz.sh [--help] [--seconds N] [--jobs N] [--no-build] [HARNESS...]
#   HARNESS  npz linqs snap metis mtx musae array_file manifest part_json checkpoint
#            (default: all that are built)
#   --seconds N  time per harness (default 60)
#   --jobs N     harnesses fuzzed at once, each on one core (default: the cores, nproc)
#   --no-build   use the harnesses already built
# Corpora live in <build>/fuzz/corpus/HARNESS and grow from run to run; seeds are made afresh
# each run in <build>/fuzz/seeds/HARNESS from ../shared/datasets (small files whole, the first
# lines of big text files; skipped when it is absent) and small files of our own. Nothing of
# either is committed.
# Reproduce a finding: <build>/tests/fuzz/tessera_fuzz_HARNESS REPRODUCER
# Environment: TESSERA_FUZZ_BUILD_DIR (default <repo>/build-fuzz), TESSERA_DATA_DIR.
# Exit status: 0 when no harness found anything, 1 otherwise (or on a usage/build error).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ALL_HARNESSES=(npz linqs snap metis mtx musae array_file manifest part_json checkpoint)
seconds=60
jobs="$(nproc)"
build=1
harnesses=()
while (($# > 0)); do
  case "$1" in
    -h | --help)
      tessera_usage "$0"
      exit 0
      ;;
    --seconds)
      (($# >= 2)) || tessera_die "--seconds needs a value"
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || tessera_die "--seconds must be a positive integer, got '$2'"
      seconds="$2"
      shift 2
      ;;
    --jobs)
      (($# >= 2)) || tessera_die "--jobs needs a value"
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || tessera_die "--jobs must be a positive integer, got '$2'"
      jobs="$2"
      shift 2
      ;;
    --no-build)
      build=0
      shift
      ;;
    -*) tessera_die "unknown option '$1' (see --help)" ;;
    *)
      [[ " ${ALL_HARNESSES[*]} " == *" $1 "* ]] ||
        tessera_die "unknown harness '$1'; the harnesses are: ${ALL_HARNESSES[*]}"
      harnesses+=("$1")
      shift
      ;;
  esac
done

dir="${TESSERA_FUZZ_BUILD_DIR}"
if ((build)); then
  tessera_install_deps
  tessera_build_sanitized tessera_fuzzers
fi
[[ -x "${dir}/tests/fuzz/tessera_fuzz_seeds" ]] ||
  tessera_die "no fuzz harnesses in ${dir} (run without --no-build)"
if ((${#harnesses[@]} == 0)); then
  # The checkpoint harness exists once the runtime has checkpoints; run every one that is built.
  for name in "${ALL_HARNESSES[@]}"; do
    [[ -x "${dir}/tests/fuzz/tessera_fuzz_${name}" ]] && harnesses+=("${name}")
  done
fi

data="$(tessera_data_dir)"
fuzz="${dir}/fuzz"
seeds="${fuzz}/seeds"
separator=$'\n--tessera-fuzz-next-file--\n' # fuzz::kFileSeparator (tests/fuzz/fuzz_support.hpp)

# The first LINES lines of a plain or gzip'd text file.
head_lines() { zcat -f "$1" | head -n "$2" || true; }

# Seeds that need no dataset: tessera_fuzz_seeds' store, arrays and checkpoint, and small valid
# files of every text format.
make_own_seeds() {
  rm -rf "${seeds}"
  mkdir -p "${seeds}"/{npz,linqs,snap,metis,mtx,musae,checkpoint}
  "${dir}/tests/fuzz/tessera_fuzz_seeds" "${seeds}"
  printf 'a\t1\t0\t1\tX\nb\t0\t0\t1\tY\nc\t1\t1\t0\tX\n%sa\tb\nc\ta\n' "${separator}" \
    >"${seeds}/linqs/tiny"
  printf '# a triangle and a tail\n0 1\n1 2\n2 0\n2 3\n%s0 1\n1 0\n2 1\n3 0\n' "${separator}" \
    >"${seeds}/snap/tiny"
  printf '%% a path\n3 2\n2\n1 3\n2\n' >"${seeds}/metis/path"
  printf '3 2 011\n4 2 5\n1 1 5 3 7\n2 2 7\n' >"${seeds}/metis/weighted"
  # Matrix Market: no published file here, so small ones of each kind the loader reads.
  printf '%%%%MatrixMarket matrix coordinate real general\n%% comment\n3 3 3\n1 2 1.0\n2 3 2.5\n3 1 -1e3\n' \
    >"${seeds}/mtx/general"
  printf '%%%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n3 2\n4 3\n' \
    >"${seeds}/mtx/pattern_symmetric"
  printf '%%%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 7\n2 1 7\n' \
    >"${seeds}/mtx/integer"
  printf 'id_1,id_2\n0,1\n1,2\n2,0\n%sid,facebook_id,page_name,page_type\n0,10,"A, Inc",company\n1,11,B,tvshow\n2,12,C,company\n%s{"0": [1, 3], "1": [0], "2": []}\n' \
    "${separator}" "${separator}" >"${seeds}/musae/tiny"
}

# Seeds cut from the real files of the datasets folder.
make_dataset_seeds() {
  cp "${data}/cora_planetoid/cora_planetoid.npz" "${data}/gnn_benchmark/cora.npz" \
    "${data}/heterophilous_graphs/minesweeper.npz" "${seeds}/npz/"
  # LINQS: three papers of Cora (each line is ~3 KB of features) citing each other.
  local content ids
  content="$(head_lines "${data}/cora_linqs/cora.content.gz" 3)"
  mapfile -t ids < <(cut -f1 <<<"${content}")
  printf '%s\n%s%s\t%s\n%s\t%s\n' "${content}" "${separator}" "${ids[0]}" "${ids[1]}" \
    "${ids[1]}" "${ids[2]}" >"${seeds}/linqs/cora_head"
  # SNAP: the first 1 KB-ish of each edge list; email-Eu-core with its labels.
  printf '%s\n%s%s\n' "$(head_lines "${data}/email_eu_core/email-Eu-core.txt.gz" 100)" \
    "${separator}" "$(head_lines "${data}/email_eu_core/email-Eu-core-department-labels" 100)" \
    >"${seeds}/snap/email_eu_core_head"
  head_lines "${data}/snap_soc_slashdot0902/soc-Slashdot0902.txt.gz" 80 >"${seeds}/snap/slashdot_head"
  # METIS: the head of 4elt (its header promises more than the head holds).
  head_lines "${data}/metis_4elt/4elt.graph" 40 >"${seeds}/metis/4elt_head"
  # MUSAE: the head of Facebook's three files (the JSON cut short).
  printf '%s\n%s%s\n%s%s\n' "$(head_lines "${data}/facebook_page_page/facebook_edges.csv.gz" 60)" \
    "${separator}" "$(head_lines "${data}/facebook_page_page/facebook_target.csv.gz" 30)" \
    "${separator}" "$(zcat "${data}/facebook_page_page/facebook.json.gz" | head -c 1024 || true)" \
    >"${seeds}/musae/facebook_head"
}

tessera_log "making seeds in ${seeds}"
make_own_seeds
if [[ -n "${data}" && -d "${data}" ]]; then
  make_dataset_seeds
else
  tessera_log "no datasets folder (TESSERA_DATA_DIR or ../shared/datasets): seeds of our own only"
fi

# Fuzzes one harness for the given seconds; prints its last statistics line, or the finding and
# how to reproduce it, and returns 1 on a finding.
fuzz_one() {
  local name="$1"
  local binary="${dir}/tests/fuzz/tessera_fuzz_${name}"
  local corpus="${fuzz}/corpus/${name}" findings="${fuzz}/findings/${name}"
  local log="${fuzz}/logs/${name}.log" reproducer
  # New inputs go to the first folder (the corpus kept between runs); the seeds are read only.
  if "${binary}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="${findings}/" "${corpus}" "${seeds}/${name}" \
    >"${log}" 2>&1; then
    echo "${name}: $(grep -E '^stat::number_of_executed_units|^Done ' "${log}" | tail -n 1 || true)"
    return 0
  fi
  reproducer="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "${log}" | tail -n 1)"
  echo "FINDING in ${name}: $(grep -m 1 -E 'ERROR:|==[0-9]+==|runtime error|uncaught|terminate' "${log}" || echo "see ${log}")"
  echo "  reproducer: ${reproducer:-none written, see ${log}}"
  echo "  reproduce:  ${binary} ${reproducer:-REPRODUCER}"
  return 1
}

# Each harness is one process on one core: --jobs of them run at once, each for the full time.
tessera_log "fuzzing ${#harnesses[@]} harness(es) for ${seconds} s each, ${jobs} at a time (logs: ${fuzz}/logs)"
results="${fuzz}/results"
rm -rf "${results}"
mkdir -p "${results}" "${fuzz}/logs"
for name in "${harnesses[@]}"; do
  [[ -x "${dir}/tests/fuzz/tessera_fuzz_${name}" ]] ||
    tessera_die "harness ${name} is not built (${dir}/tests/fuzz/tessera_fuzz_${name})"
  mkdir -p "${fuzz}/corpus/${name}" "${fuzz}/findings/${name}" "${seeds}/${name}"
done
for name in "${harnesses[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do
    wait -n || true
  done
  { fuzz_one "${name}" >"${results}/${name}.out" 2>&1 && echo 0 || echo 1; } \
    >"${results}/${name}.status" &
done
wait
status=0
for name in "${harnesses[@]}"; do
  cat "${results}/${name}.out"
  [[ "$(cat "${results}/${name}.status")" == 0 ]] || status=1
done
if ((status)); then
  echo "fuzzing found problems (above); logs in ${fuzz}/logs" >&2
else
  tessera_log "no findings in: ${harnesses[*]} (${seconds} s each)"
fi
exit "${status}"
