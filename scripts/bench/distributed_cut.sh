#!/usr/bin/env bash
# Which distributed cut finishes on large power-law graphs: RMAT graphs (edge factor 16) cut by P
# ranks that each read only their rows (mpirun -np P tessera-partition), with every candidate
# Debian's libraries offer, next to METIS cutting the whole graph in one process:
#   hypergraph           Zoltan PHG on the hypergraph of the rows (the default under mpirun)
#   hypergraph-agg       the same with Zoltan's own matching (agglomerative, nets up to 500 pins;
#                        what the hypergraph method ran over ranks before it was tuned)
#   phg-graph            Zoltan PHG on the graph model (LB_METHOD=GRAPH)
#   zoltan-scotch        Zoltan's graph method through its PT-Scotch (GRAPH_PACKAGE=SCOTCH)
#   ptscotch             PT-Scotch's k-way mapping, speed strategy (--method ptscotch)
#   ptscotch-scalability the same with speed+scalability
#   ptscotch-short-fm    the same with at most 2 FM passes of 20 moves (a strategy string)
# Each run is stopped after --limit seconds and reported as not finished. Prints, for every scale,
# P and candidate: the cut's time and its ratio to METIS's, edge cut and total volume against
# METIS's, vertex balance, the largest rank's peak memory and, for the default, the bound the
# issue set (1.5x its one-process peak / P + 256 MiB).
#
# Usage: scripts/bench/distributed_cut.sh [--scales "S ..."] [--ranks "P ..."]
#          [--candidates "C ..."] [--limit SECONDS] [--quick] [--no-build]
#   --scales "S"      RMAT scales (default "18 20")
#   --ranks "P"       rank counts (default "2 4")
#   --candidates "C"  default: all seven above
#   --limit SECONDS   per run (default 1800)
#   --quick           scale 16, 2 ranks, the hypergraph candidates only (about a minute)
#   --no-build        use the existing build instead of installing deps and building
# Environment: TESSERA_BUILD_DIR (default <repo>/build); WORK (keep the graphs there and reuse
#   them). Needs GNU time (/usr/bin/time, Debian package "time").
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

scales="18 20"
ranks_list="2 4"
candidates="hypergraph hypergraph-agg phg-graph zoltan-scotch ptscotch ptscotch-scalability
ptscotch-short-fm"
limit=1800
quick=0
build=1
tessera_parse_args "$0" --scales=scales --ranks=ranks_list --candidates=candidates \
  --limit=limit --quick=quick=1 --no-build=build=0 -- "$@"
tessera_require_positive_int --limit "${limit}"
if ((quick)); then
  scales=16
  ranks_list=2
  candidates="hypergraph hypergraph-agg phg-graph"
fi

if ((build)); then
  tessera_install_deps
  tessera_apt_ensure time
  tessera_build "${TESSERA_BUILD_DIR}"
fi
apps="${TESSERA_BUILD_DIR}/apps"
partitioner="${apps}/tessera-partition/tessera-partition"
converter="${apps}/tessera-convert/tessera-convert"
tessera_require_programs "${partitioner}" "${converter}"
[[ -x /usr/bin/time ]] || tessera_die "GNU time (/usr/bin/time) not found: apt-get install time"
tessera_bench_work_dir
export OMP_NUM_THREADS=1

# The flags of a candidate.
candidate_flags() {
  case "$1" in
  hypergraph) echo "--method hypergraph" ;;
  hypergraph-agg)
    echo "--method hypergraph --zoltan-param PHG_COARSENING_METHOD=agg" \
      "--zoltan-param PHG_MATCH_EDGE_SIZE_THRESHOLD=500"
    ;;
  phg-graph) echo "--method hypergraph --zoltan-param LB_METHOD=GRAPH" ;;
  zoltan-scotch)
    echo "--method hypergraph --zoltan-param LB_METHOD=GRAPH --zoltan-param GRAPH_PACKAGE=SCOTCH"
    ;;
  ptscotch) echo "--method ptscotch" ;;
  ptscotch-scalability) echo "--method ptscotch --scotch-strategy speed+scalability" ;;
  ptscotch-short-fm)
    local fm="f{move=20,pass=2,bal=0.05}" strategy
    strategy="r{sep=m{asc=b{width=3,bnd=q{strat=${fm}},org=q{strat=${fm}}},low=q{strat=h{pass=10}"
    strategy+="${fm}},seq=q{strat=h{pass=10}${fm}},vert=1000,rat=0.8},seq=r{job=t,map=t,poli=S,"
    strategy+="sep=h{pass=10}${fm}},bal=0.05}"
    echo "--method ptscotch --scotch-strategy ${strategy}"
    ;;
  *) tessera_die "unknown candidate '$1'" ;;
  esac
}
for c in ${candidates}; do candidate_flags "${c}" >/dev/null; done

# run_cut LABEL RANKS FLAGS...: one cut (RANKS 0: one process), its method row in LABEL.row, the
# largest peak (MiB) in LABEL.mib, the exit status (124: over --limit) in LABEL.rc.
run_cut() {
  local label="$1" ranks="$2"
  shift 2
  rm -f "${work}/${label}".*.kib
  local rc=0
  if ((ranks == 0)); then
    timeout "${limit}" /usr/bin/time -f %M -o "${work}/${label}.0.kib" "${partitioner}" "$@" \
      >"${work}/${label}.log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout "${limit}" mpirun -np "${ranks}" --oversubscribe --bind-to none -x OMP_NUM_THREADS \
      bash -c '/usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK}.kib" "$@"' "${work}/${label}" \
      "${partitioner}" "$@" >"${work}/${label}.log" 2>&1 || rc=$?
  fi
  echo "${rc}" >"${work}/${label}.rc"
  grep -E '^(metis|hypergraph|ptscotch) +[0-9.]+ ' "${work}/${label}.log" | tail -1 \
    >"${work}/${label}.row" || true
  cat "${work}/${label}".*.kib 2>/dev/null | awk '$1 > max { max = $1 } END { printf "%.0f",
    max / 1024 }' >"${work}/${label}.mib"
}

summary="${work}/summary"
printf '%-5s %2s %-21s %9s %7s %9s %8s %6s %9s %9s\n' scale P candidate "cut s" "x METIS" \
  "cut/METIS" "vol/METIS" v-bal "peak MiB" "bound MiB" >"${summary}"
for scale in ${scales}; do
  graph="${work}/rmat${scale}"
  if [[ ! -f "${graph}/dataset.json" ]]; then
    tessera_log "generating rmat scale ${scale} into ${graph}"
    "${converter}" --dataset "rmat:scale=${scale},edge-factor=16,features=16,classes=4" \
      --add-split --out "${graph}"
  fi
  for ranks in ${ranks_list}; do
    tessera_log "scale ${scale}, P = ${ranks}: METIS in one process"
    run_cut metis 0 --dataset "${graph}" --parts "${ranks}" --method metis
    read -r _ metis_ms metis_cut metis_vol _ <"${work}/metis.row"
    printf '%-5s %2s %-21s %9.1f %7s %9s %8s %6s %9s\n' "${scale}" "${ranks}" "metis (1 process)" \
      "$(awk -v ms="${metis_ms}" 'BEGIN { print ms / 1e3 }')" 1.00 1.000 1.000 \
      "$(awk '{ print $7 }' "${work}/metis.row")" "$(cat "${work}/metis.mib")" >>"${summary}"
    for c in ${candidates}; do
      tessera_log "scale ${scale}, P = ${ranks}: ${c} over ${ranks} ranks"
      # shellcheck disable=SC2046 # the candidate's flags are words
      run_cut "${c}" "${ranks}" --dataset "${graph}" --parts "${ranks}" $(candidate_flags "${c}")
      bound="-"
      if [[ "${c}" == hypergraph ]]; then
        tessera_log "scale ${scale}, P = ${ranks}: ${c} in one process (its peak)"
        run_cut one 0 --dataset "${graph}" --parts "${ranks}" --method hypergraph
        bound=$(awk -v one="$(cat "${work}/one.mib")" -v p="${ranks}" \
          'BEGIN { printf "%.0f", 1.5 * one / p + 256 }')
      fi
      rc=$(cat "${work}/${c}.rc")
      if [[ "${rc}" != 0 || ! -s "${work}/${c}.row" ]]; then
        status="failed (exit ${rc})"
        [[ "${rc}" == 124 ]] && status="not finished in ${limit} s"
        printf '%-5s %2s %-21s %s\n' "${scale}" "${ranks}" "${c}" "${status}" >>"${summary}"
        continue
      fi
      read -r _ ms cut vol _ _ vbal _ <"${work}/${c}.row"
      awk -v s="${scale}" -v p="${ranks}" -v c="${c}" -v ms="${ms}" -v mms="${metis_ms}" \
        -v cut="${cut}" -v mcut="${metis_cut}" -v vol="${vol}" -v mvol="${metis_vol}" \
        -v vbal="${vbal}" -v peak="$(cat "${work}/${c}.mib")" -v bound="${bound}" \
        'BEGIN { printf "%-5s %2s %-21s %9.1f %7.2f %9.3f %8.3f %6s %9s %9s\n", s, p, c,
                 ms / 1e3, ms / mms, cut / mcut, vol / mvol, vbal, peak, bound }' >>"${summary}"
    done
  done
done

echo
echo "Distributed cuts of RMAT graphs (each rank reads its rows; ${limit} s limit per run;"
echo "x METIS = cut time / one-process METIS's; cut = edge cut; vol = total halo volume):"
cat "${summary}"
