#!/usr/bin/env bash
# The checks that need a CUDA GPU, as one prepared run (CI has no GPU and never runs this):
#   1. the CUDA tests (compiled models and embedding training on the device);
#   2. bench/gpu_inference.py: compiled batch inference on the GPU against the interpreter;
#   3. the experiment grid's missing runs that match $ONLY, on the GPU, for what time is left.
# Everything lands in $OUT (default runs/device): logs, the bench JSON, and a tarball of the
# experiment result files to unpack over docs/results/experiments/.
#
#   OUT=runs/device TOTAL=560 bash scripts/device_check.sh
#
# TOTAL is the wall-clock budget in seconds for the whole script; the experiments get what the
# first two steps leave, less TAIL seconds for the runs still in flight to finish.
set -u
OUT=${OUT:-runs/device}
TOTAL=${TOTAL:-560}
TAIL=${TAIL:-150}
JOBS=${JOBS:-14}
ONLY=${ONLY:-.}            # a regular expression over run names: by default every missing run
PY=${PYTHON:-python3}
START=$(date +%s)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then   # packages the machine lacks (lark), carried as wheels
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if ! $PY -c 'import lark' 2>/dev/null; then
    echo "device_check: lark is not installed here; put its wheel in .whl/" \
        "(pip download lark --no-deps -d .whl) and carry .whl" >&2
    exit 2
fi
elapsed() { echo $(( $(date +%s) - START )); }

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -c \
    'import torch, sys; print(sys.version); print("torch", torch.__version__, torch.cuda.get_device_name())'
} > "$OUT/machine.txt" 2>&1

echo "== 1. CUDA tests ($(elapsed) s)"
timeout 120 $PY -m pytest -q -p no:cacheprovider tests/test_runtime.py tests/test_experiments.py \
    -k "cuda or device or cpu" 2>&1 | tee "$OUT/tests.log"

echo "== 2. inference bench ($(elapsed) s)"
timeout 180 $PY bench/gpu_inference.py --device cuda --out "$OUT/gpu_inference.json" 2>&1 \
    | tee "$OUT/gpu_inference.log"

budget=$(( TOTAL - $(elapsed) - TAIL ))
echo "== 3. experiments: $budget s to start runs, $TAIL s for the last to finish ($(elapsed) s)"
if [ "$budget" -gt 30 ]; then
    timeout $(( budget + TAIL )) $PY -m rasp_compiler.cli experiment table --device cuda --jobs "$JOBS" \
        --time-budget "$budget" --only "$ONLY" --doc "$OUT/experiments.md" --img /tmp/device_img 2>&1 \
        | grep -v "^\s*$" | tee "$OUT/experiments.log"
fi
tar czf "$OUT/experiment_results.tgz" docs/results/experiments
echo "== done ($(elapsed) s)"
