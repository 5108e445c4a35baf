#!/bin/bash
# A rank that stops (SIGSTOP) must not stall the job without a word (issue 37): the ranks that
# wait for it end the job within --peer-timeout, naming it and the step; a rank stopped for a
# while and continued is reported as a stall in the run summary.
# Usage: stopped_rank_watchdog.sh MODE PROGRAM MPIEXEC WORK_DIR, MODE one of
#   stopped-train    tessera-train, rank 1 stopped for good: halo exchanges wait for it
#   stopped-mlp      tessera-mlp, rank 1 stopped for good: the gradient sums (collectives) wait
#   stopped-sampled  tessera-train --mode sampled, rank 1 stopped for good: the gradient sums and
#                    the sampling threads' exchanges (a communicator of their own) wait
#   paused-train     tessera-train, rank 1 stopped for 1.5 s, then continued: a stall
set -u
mode=$1 program=$2 mpiexec=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
log=$work/run.log
sbm=sbm:nodes=20000,classes=4,avg-degree=8,p-in=0.9,features=16,noise=0.5
case $mode in
  stopped-train) flags=(--dataset "$sbm" --epochs 100000 --peer-timeout 3) ;;
  stopped-mlp) flags=(--epochs 100000 --peer-timeout 3) ;;
  stopped-sampled)
    flags=(--dataset "$sbm" --mode sampled --fanouts 5,5 --batch-size 256 --epochs 100000
      --peer-timeout 3)
    ;;
  paused-train) flags=(--dataset "$sbm" --epochs 300) ;;
esac
"$mpiexec" -np 2 --oversubscribe --bind-to none "$program" "${flags[@]}" --threads 1 \
  --log-every 1 >"$log" 2>&1 &
launcher=$!
cleanup() { # whatever happens, no stopped rank is left behind
  for pid in $(pgrep -P "$launcher" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null; done
  kill -9 "$launcher" 2>/dev/null
}
trap cleanup EXIT
fail() { cat "$log"; echo "FAILED: $*"; exit 1; }
for _ in $(seq 600); do
  grep -q "epoch *3/" "$log" && break
  sleep 0.1
done
grep -q "epoch *3/" "$log" || fail "training did not start"
rank1=$(pgrep -P "$launcher" | sort -n | tail -1)
[ -n "$rank1" ] || fail "no rank process under mpirun"
kill -STOP "$rank1"
start=$SECONDS
if [ "$mode" = paused-train ]; then
  sleep 1.5
  kill -CONT "$rank1"
  wait "$launcher" || fail "the job failed after the pause"
  grep -qE "stall: rank [01] waited [0-9.]+ s \([0-9]+ median epochs\) for .* during epoch" "$log" ||
    fail "no stall line in the summary"
else
  # The job must end on its own: well within the timeout, the grace to ask who answers, and MPI's
  # abort. Waited for here in steps, so a hang fails the test instead of stalling it.
  for _ in $(seq 300); do
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$launcher" 2>/dev/null && fail "the job still runs $((SECONDS - start)) s after rank 1 stopped"
  grep -qE "\[rank 0\] error: rank 0 has waited [0-9]+ s for .* during epoch [0-9]+.*; rank 1 does not answer \(stopped, stuck or on a lost node\): ending the job \(limit 3 s: the peer timeout given\); --peer-timeout sets it" "$log" ||
    fail "no error naming rank 1, the step and the limit"
fi
cat "$log"
echo "PASSED: $mode in $((SECONDS - start)) s"
