#!/usr/bin/env bash
# Measurements that need a quiet machine with many cores (a lent device host: 16 idle cores), in one call:
#   issue 26 - benchmarks/counters.py, three consecutive runs per model at 1 and 2 threads, each model on its
#              own two cores, first quiet, then with one busy process on each of those cores;
#   issue 23 - layerperf collect over the zoo at batch 1,8 and threads 1,2 (twice: the second sweep tells how
#              well the host repeats itself), plus the ONNX files in $HF_DIR, each group of models on its own
#              two cores; then benchmarks/predict.py's leave-one-model-out evaluation.
#
#   OUT=/tmp/out bash benchmarks/quiet_host.sh          (PY: the python; QUICK=1: a few seconds per part)
#   OUT=/tmp/out SERIAL=1 SWEEP=resnet18,mobilenet_v2 bash benchmarks/quiet_host.sh
#   OUT=/tmp/out SERIAL=1 BUSY=0 P1=450 bash benchmarks/quiet_host.sh   (the quiet counter runs alone)
#
# SERIAL=1: nothing runs beside the quiet counter runs (side by side, the lanes of an earlier call disturbed each
# other: the speed checks set aside 218 of 270 sweep runs): the models' counter runs go one after the other on
# the first pair of cores, quiet, then with a busy process on each of its cores; while those busy runs go, one
# lane on another pair measures the SWEEP models twice, one sweep after the other (the host's own repeatability).
#
# Everything lands in $OUT/quiet.tar.gz (logs and stores) and a summary on stdout.
set -u
PY=${PY:-python3}
OUT=${OUT:?OUT must name a folder}
HF_DIR=${HF_DIR:-.dev}
work=$(mktemp -d /tmp/quiet.XXXX)
mkdir -p "$work/logs" "$work/stores"
ncpu=$(nproc)
if [[ ${QUICK:-0} == 1 ]]; then
  runs=2; passes=2; crepeat=1; zoo_groups=("resnet18" "mobilenet_v2"); batch=1; P1=300; P2=300
else
  runs=10; passes=5; crepeat=3; P1=${P1:-230}; P2=${P2:-200}; batch=1,8
  zoo_groups=("bert-base" "vgg16" "resnet50" "gpt2-small,lstm" "resnet18,mobilenet_v2")
fi
cmodels=(resnet50 mobilenet_v2 bert-base)
SERIAL=${SERIAL:-0}
[[ ${QUICK:-0} == 1 ]] && cmodels=(mobilenet_v2)

command -v taskset >/dev/null || taskset() { shift 2; "$@"; }   # unpinned where taskset is missing
pair() { echo "$((2 * $1 % ncpu))-$((2 * $1 % ncpu + 1))"; }   # the k-th pair of cores

info() {
  echo "== machine"; nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
  cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null
  "$PY" -c "import sys, onnxruntime, numpy, onnx; print(sys.version.split()[0], 'ort', onnxruntime.__version__, 'numpy', numpy.__version__, 'onnx', onnx.__version__)"
  "$PY" -c "from layerperf.counters import CounterSet
with CounterSet(['task-clock'], threads='self') as cs:
    cs.enable(); print('task-clock counter ok')" 2>&1 | tail -1
  uptime
}

left() { local n=$((phase_end - SECONDS)); ((n > 5)) && echo $n || echo 5; }  # this phase's seconds left

counters() {  # $1 tag, $2 model, $3 cpu pair
  local i
  for ((i = 1; i <= crepeat; i++)); do
    timeout "$(left)" taskset -c "$3" "$PY" benchmarks/counters.py --models "$2" --threads 1,2 --runs "$runs" --passes "$passes" \
      --skip-read-cost >"$work/logs/counters_$1_$2_$i.log" 2>&1
  done
}

collect() {  # $1 cpu pair, then store:models ... measured one after the other
  local p=$1 job; shift
  for job in "$@"; do
    timeout -s INT "$(left)" taskset -c "$p" "$PY" -m layerperf collect --models "${job#*:}" --batch "$batch" \
      --threads 1,2 --runs "$runs" --store "$work/stores/${job%%:*}.db" >"$work/logs/collect_${job%%:*}.log" 2>&1
  done
}
busy_on() {  # one spinning process per core of a pair; prints their pids
  local c
  for c in $(seq "${1%-*}" "${1#*-}"); do taskset -c "$c" sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!; done
}

spin=()
trap 'kill "${spin[@]}" 2>/dev/null; rm -rf "$work"' EXIT   # no spinner left behind, however it ends
info | tee "$work/logs/machine.log"
hf=$(ls "$HF_DIR"/*.onnx 2>/dev/null | paste -sd, -)
[[ ${QUICK:-0} == 1 ]] && hf=""

serial() {  # SERIAL=1: $1 quiet|busy; every model's counter runs on the first pair, one after the other
  local m
  for m in "${cmodels[@]}"; do counters "$1" "$m" "$(pair 0)"; done
}

if [[ $SERIAL == 1 ]]; then
  echo "== phase 1: counters quiet, one model after the other, nothing beside them ($(date +%T))"
  start=$SECONDS; phase_end=$((SECONDS + P1))
  serial quiet
  echo "phase 1: $((SECONDS - start)) s"; uptime
  if [[ ${BUSY:-1} == 1 ]]; then   # BUSY=0: no phase 2
  echo "== phase 2: counters with a busy process per core; beside them sweeps A then B of ${SWEEP:-} ($(date +%T))"
  start=$SECONDS; phase_end=$((SECONDS + P2)); pids=()
  spin=($(busy_on "$(pair 0)"))
  serial busy & pids+=($!)
  [[ -n ${SWEEP:-} ]] && { collect "$(pair 4)" "A0:$SWEEP" "B0:$SWEEP" & pids+=($!); }
  wait "${pids[@]}"; kill "${spin[@]}" 2>/dev/null
  echo "phase 2: $((SECONDS - start)) s"; uptime
  fi
else
echo "== phase 1: counters quiet, zoo sweep A, then the ONNX files ($(date +%T))"
start=$SECONDS; phase_end=$((SECONDS + P1)); k=0; pids=()
for m in "${cmodels[@]}"; do counters quiet "$m" "$(pair $k)" & pids+=($!); k=$((k + 1)); done
for ((g = 0; g < ${#zoo_groups[@]}; g++)); do
  jobs=("A$g:${zoo_groups[g]}")
  ((g == ${#zoo_groups[@]} - 1)) && [[ -n $hf ]] && jobs+=("HF:$hf")   # the lightest lane takes the files too
  collect "$(pair $k)" "${jobs[@]}" & pids+=($!); k=$((k + 1))
done
wait "${pids[@]}"
echo "phase 1: $((SECONDS - start)) s"; uptime

echo "== phase 2: counters with a busy process per core, zoo sweep B ($(date +%T))"
start=$SECONDS; phase_end=$((SECONDS + P2)); k=0; pids=(); spin=()
for m in "${cmodels[@]}"; do
  p=$(pair $k); spin+=($(busy_on "$p")); counters busy "$m" "$p" & pids+=($!); k=$((k + 1))
done
for ((g = 0; g < ${#zoo_groups[@]}; g++)); do
  collect "$(pair $k)" "B$g:${zoo_groups[g]}" & pids+=($!); k=$((k + 1))
done
wait "${pids[@]}"; kill "${spin[@]}" 2>/dev/null
echo "phase 2: $((SECONDS - start)) s"; uptime
fi

echo "== results ($(date +%T))"
tail -n 3 "$work"/logs/counters_*.log | grep -E "^(==>|resnet50|mobilenet_v2|bert-base)"
tail -n 1 "$work"/logs/collect_*.log
a=(); b=()
for f in "$work"/stores/A*.db; do a+=(--store "$f"); done
for f in "$work"/stores/B*.db; do b+=(--again "$f"); done
tar -czf "$OUT/quiet.tar.gz" -C "$work" logs stores
echo "stores and logs: $(du -h "$OUT/quiet.tar.gz" | cut -f1)"
if [[ ${EVAL:-1} == 1 ]] && "$PY" -c "import sklearn" 2>/dev/null; then
  echo "== evaluation (sweep A, and sweep A against B)"
  timeout "${P3:-100}" "$PY" benchmarks/predict.py "${a[@]}" "${b[@]}" 2>&1 | tail -n 25
fi
