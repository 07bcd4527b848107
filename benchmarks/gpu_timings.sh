#!/usr/bin/env bash
# The party-valuation timings of docs/benchmarks.md on a GPU machine: the device, Syn at the paper preset, the demo,
# Diab at the fast preset and the 12-party valuation of every coalition at the fast preset, a width a call (with
# its progress bar, so that a run cut off by its time limit still shows its rate). Each step's whole output is kept
# in $LOG_DIR/<step>.log (default: the current folder); the terminal gets its last lines and its wall time. Each
# step's time limit (seconds) can be set: SYN_LIMIT, DEMO_LIMIT, DIAB_LIMIT, TWELVE_LIMIT, CUT_LIMIT, SAMPLED_LIMIT.
# STEPS picks the steps and their order (default "syn demo diab twelve"); "cut" values one batch of 8 permutations of
# the 12 parties twice, every call full and each width's last call cut to its rows (not cut on a GPU by default: where
# it pays); "sampled" values the 12 parties by the default route (Latin permutation blocks) until every stderr <= 0.02
# (a run cut off by its limit shows how far its progress bar got); "default12", "default24" and "default50" value 12,
# 24 and 50 parties by today's default route (coalition posteriors by importance sampling, the Laplace control
# variate, docs/importance.md) until every stderr <= 0.02, 0.03 and 0.05 (DEFAULT12_LIMIT, DEFAULT24_LIMIT,
# DEFAULT50_LIMIT).
#   BAYESVAL_DATA=<folder holding pima_indians_diabetes.csv> bash benchmarks/gpu_timings.sh
set -uo pipefail
logs="${LOG_DIR:-.}"
export PYTHONUNBUFFERED=1
step() {  # step SECONDS NAME COMMAND...: one timed step
    local limit=$1 name=$2; shift 2
    local start=$(date +%s%N)
    timeout "$limit" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms wall"
    tr '\r' '\n' <"$logs/$name.log" | grep -v "Warning\|warn(\|^\s*$" | tail -n 6
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import jax, numpyro; print('jax', jax.__version__, 'numpyro', numpyro.__version__, jax.devices())"
for name in ${STEPS:-syn demo diab twelve}; do
    case $name in
        syn) step "${SYN_LIMIT:-150}" syn python3 benchmarks/bench_valuation.py syn --no-baseline ;;
        demo) step "${DEMO_LIMIT:-80}" demo python3 -m bayesval.cli demo --no-progress ;;
        diab) step "${DIAB_LIMIT:-60}" diab python3 benchmarks/bench_valuation.py diab --no-baseline ;;
        twelve) step "${TWELVE_LIMIT:-360}" twelve python3 benchmarks/bench_scale.py --end-to-end 12 --child members \
            --exact --progress --memory-limit-mb 32768 ;;
        cut) step "${CUT_LIMIT:-540}" cut python3 benchmarks/bench_permutation_calls.py --cuts off on \
            --memory-limit-mb 32768 ;;
        sampled) step "${SAMPLED_LIMIT:-590}" sampled python3 benchmarks/bench_scale.py --end-to-end 12 \
            --child members --tolerance 0.02 --progress --memory-limit-mb 32768 ;;
        default12) step "${DEFAULT12_LIMIT:-300}" default12 python3 benchmarks/bench_scale.py --end-to-end 12 \
            --child members --tolerance 0.02 --control-variate --progress --memory-limit-mb 32768 ;;
        default24) step "${DEFAULT24_LIMIT:-600}" default24 python3 benchmarks/bench_scale.py --end-to-end 24 \
            --child members --tolerance 0.03 --control-variate --progress --memory-limit-mb 32768 ;;
        default50) step "${DEFAULT50_LIMIT:-600}" default50 python3 benchmarks/bench_scale.py --end-to-end 50 \
            --child members --tolerance 0.05 --control-variate --progress --memory-limit-mb 32768 ;;
        *) echo "unknown step $name (syn, demo, diab, twelve, cut, sampled, default12, default24, default50)" >&2
           exit 2 ;;
    esac
done
