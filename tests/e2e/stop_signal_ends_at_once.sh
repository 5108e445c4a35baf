#!/bin/bash
# Stop signals that cannot wait for an epoch's end (issue 37): one that arrives before training
# starts (while the data loads) ends the process at once with a line saying so; a second signal
# during training ends it at once, whichever the first was.
# Usage: stop_signal_ends_at_once.sh MODE TRAIN WORK_DIR, MODE one of
#   before-training   SIGINT while a large generated graph loads
#   second-signal     SIGINT after epoch 1, then SIGTERM: the process dies of the SIGTERM
set -u
mode=$1 train=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
log=$work/train.log
dataset=rmat:scale=20,edge-factor=16,features=16,classes=4
fail() { cat "$log"; echo "FAILED: $*"; exit 1; }

"$train" --dataset "$dataset" --epochs 100000 --threads 1 --log-every 1 >"$log" 2>&1 &
pid=$!
wait_for() { # PATTERN: waits up to 60 s for it in the log
  for _ in $(seq 600); do
    grep -q "$1" "$log" && return 0
    sleep 0.1
  done
  fail "no '$1' in 60 s"
}
case $mode in
  before-training)
    wait_for "^backend:"
    sleep 0.3 # generating the graph takes seconds
    kill -INT "$pid"
    wait "$pid"
    status=$?
    [ "$status" -eq 130 ] || fail "exit status $status, expected 130 (killed by SIGINT)"
    grep -q "\[rank 0\] error: stopped by SIGINT before training started" "$log" ||
      fail "no 'stopped by SIGINT before training started' line"
    ! grep -q "epoch *1/" "$log" || fail "an epoch ran after the signal"
    ;;
  second-signal)
    wait_for "epoch *1/"
    kill -INT "$pid"
    sleep 0.05
    kill -TERM "$pid"
    wait "$pid"
    status=$?
    [ "$status" -eq 143 ] || fail "exit status $status, expected 143 (killed by SIGTERM)"
    ! grep -q "training stopped by" "$log" || fail "the second signal waited for the epoch's end"
    ;;
esac
cat "$log"
echo "PASSED: $mode, exit status $status"
