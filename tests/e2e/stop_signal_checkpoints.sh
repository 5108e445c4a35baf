#!/bin/bash
# A stop signal during training: the epoch finishes, a checkpoint is written, every rank exits
# non-zero with one message, and a run resumed from the checkpoint continues after that epoch.
# Usage: stop_signal_checkpoints.sh MODE TRAIN MPIEXEC DATASET WORK_DIR, MODE one of
#   sigint-alone     one process without mpirun, SIGINT to it (Ctrl-C)
#   usr1-to-mpirun   2 ranks, SIGUSR1 to mpirun (which forwards it to every rank)
#   term-to-ranks    2 ranks, SIGTERM to every rank's process (what a batch system does)
set -u
mode=$1 train=$2 mpiexec=$3 dataset=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
log=$work/train.log checkpoints=$work/checkpoints
flags=(--dataset "$dataset" --epochs 100000 --threads 1 --log-every 1 --checkpoint-dir "$checkpoints")
if [ "$mode" = sigint-alone ]; then
  "$train" "${flags[@]}" >"$log" 2>&1 &
else
  "$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${flags[@]}" >"$log" 2>&1 &
fi
launcher=$!

# Wait for training to be under way, then signal.
for _ in $(seq 600); do
  grep -q "epoch    3/" "$log" && break
  sleep 0.1
done
case $mode in
  sigint-alone) kill -INT "$launcher"; signal=SIGINT ;;
  usr1-to-mpirun) kill -USR1 "$launcher"; signal=SIGUSR1 ;;
  term-to-ranks) kill -TERM $(pgrep -P "$launcher" -f tessera-train); signal=SIGTERM ;;
esac
wait "$launcher"
status=$?
cat "$log"

fail() { echo "FAILED: $*"; exit 1; }
[ "$status" -ne 0 ] || fail "the job exited 0 after $signal"
line=$(grep -oE "\[rank 0\] error: training stopped by $signal after epoch [0-9]+ of 100000; checkpoint of epoch [0-9]+ in .*--resume" "$log")
[ -n "$line" ] || fail "no '[rank 0] error: training stopped by $signal ...' line"
[ "$(grep -c "error:" "$log")" -eq 1 ] || fail "more than one error message"
epoch=$(sed -E 's/.*after epoch ([0-9]+) of.*/\1/' <<<"$line")
grep -q "\"checkpoint\": \"epoch-$(printf %06d "$epoch")\"" "$checkpoints/latest.json" ||
  fail "latest.json does not name epoch $epoch"

# One process resumes what any rank count saved, after that epoch.
"$train" --dataset "$dataset" --epochs $((epoch + 2)) --threads 1 --log-every 1 \
  --resume "$checkpoints" >"$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "resume failed"; }
cat "$work/resume.log"
grep -q "resuming from $checkpoints after epoch $epoch" "$work/resume.log" || fail "no resume line"
grep -q "epoch *$((epoch + 1))/$((epoch + 2))" "$work/resume.log" || fail "epoch $((epoch + 1)) not trained"
echo "PASSED: $mode stopped after epoch $epoch with status $status"
