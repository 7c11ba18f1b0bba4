#!/usr/bin/env bash
# Detached part of job-triton.sh, on the H200 (no network): `crossover engines install
# triton --wheels /tmp/xo/tenv` (the carried nvidia-pytriton wheel and the stub
# environment's, pip kept off every index), the stub on the machine's Python 3.12 with torch and
# vLLM from its venv (--engine-python); then, once the checkpoint exists, `crossover plan`
# writes the repository with vLLM in the Python backend, as vllm serve gets it in
# scripts/h200/sweep-triton.yaml (512 sequences, 512-token context, 8,192 batched tokens,
# dummy weights). Writes /tmp/xo/triton.done ("rc=N").
set -uo pipefail
W=/tmp/xo; T0=$(date +%s)
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$W/src
export PATH=/opt/torch/.venv/bin:$PATH HF_HUB_OFFLINE=1
PY=/opt/torch/.venv/bin/python3
# the crossover sources as job-start.sh copied them (the tree may change under us)
[ -d $W/src/crossover ] || { echo "rc=8" > $W/triton.done; echo "no $W/src"; exit 8; }
python3 -m crossover engines install triton --no-llamacpp --python $PY --engine-python $PY \
  --wheels $W/tenv
rc=$?; echo "install rc=$rc $(( $(date +%s) - T0 ))s"
[ $rc = 0 ] || { echo "rc=$rc" > $W/triton.done; exit $rc; }
ENV=$(python3 -c "from crossover.builds.triton import find_triton as f; print(f().env)")
cat "$(dirname "$ENV")/install.json"
"$ENV/bin/python" -c "import sys, numpy; print('stub env:', sys.version.split()[0], 'numpy', numpy.__version__, sys.path)"
while [ ! -f $W/checkpoints.done ] && [ ! -f $W/dense.done ] && [ $(( $(date +%s) - T0 )) -lt 600 ]; do sleep 2; done
python3 -m crossover plan --engine triton --hosted vllm --model $W/mh/hf --max-concurrency 512 \
  --max-seq-len 512 --load-format dummy --out $W/plan-tv
rc=$?; grep -A1 engine_args $W/plan-tv/triton_model_repo/vllm/config.pbtxt
echo "plan rc=$rc $(( $(date +%s) - T0 ))s"
echo "rc=$rc" > $W/triton.done
