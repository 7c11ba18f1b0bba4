#!/usr/bin/env bash
# The whole H200 job in one device call (the machine starts bare, has no network,
# and a command may run 10 minutes). Run from the repository root on the device:
#   carry: [".whl", "build/xo-builds-device"]; command: bash scripts/h200/job.sh
# Phase 1 (while llama.cpp builds with CUDA): transformers serve sweeps.
# Phase 2: llama.cpp sweeps, same database (phase 1's runs are kept, not repeated).
# Everything lands in $OUT; an interrupted sweep resumes from the returned database:
#   tar xzf results.tar.gz -C /tmp/xo && bash scripts/h200/job.sh   (RESUME=1)
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*"; }
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$ROOT/src
XO="python3 -m crossover"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
say "python $(python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)')"

# llama.cpp source (pinned, vendored in llama-cpp-python 0.3.36) -> CUDA build in background
SRC=$CROSSOVER_CACHE/src/llama.cpp-0.3.36; mkdir -p $SRC
tar xzf build/xo-builds-device/llama-src.tar.gz -C $SRC --strip-components=1
echo llama-cpp-python-0.3.36 > $SRC/.crossover-complete
( $XO engines install llamacpp --cuda --cuda-arch 90 -j 12 -q > $W/build.log 2>&1; echo "rc=$?" >> $W/build.log ) &
BUILD=$!

# the same model for every engine: Llama-3-8B shape, random weights, one tokenizer
( $XO models synth --arch llama-3-8b --format gguf --dtype f16 --out $W/mg -q > $W/synth-gguf.log 2>&1 ) &
SYNTH=$!
$XO models synth --arch llama-3-8b --format hf --dtype bf16 --out $W/mh -q > $W/synth-hf.log 2>&1 || { cat $W/synth-hf.log; }
say "hf model written: $(du -sh $W/mh | cut -f1)"

P1_END=${P1_END:-330}
left=$(( P1_END - $(el) ))
if [ $left -gt 30 ]; then
  say "phase 1: transformers serve (${left}s)"
  timeout -s INT $left $XO sweep --config scripts/h200/transformers.yaml --out $W/sweep --allow-invalid --no-report
fi
say "waiting for the llama.cpp build and the GGUF"
wait $SYNTH; wait $BUILD
tail -3 $W/build.log; tail -2 $W/synth-gguf.log
SERVER=$(python3 -c "from crossover.builds.llamacpp import find_llama_server as f; print(f(cuda=True) or '')")
[ -n "$SERVER" ] || { say "llama.cpp build failed"; tail -40 $W/build.log; }
say "llama-server: $SERVER"
ln -sf "$SERVER" $W/llama-server
$W/llama-server --version 2>&1 | tail -2

P2_END=${P2_END:-555}
left=$(( P2_END - $(el) ))
say "phase 2: llama.cpp, then any transformers levels left (${left}s)"
timeout -s INT $left $XO sweep --config scripts/h200/all.yaml --out $W/sweep --allow-invalid --no-report

say "packing results"
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("/tmp/xo/sweep/sweep.db"); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()
PY
cp $W/build.log $W/synth-*.log $W/sweep/ 2>/dev/null
tar czf $OUT/results.tar.gz -C $W sweep
# the CUDA llama-server, so a later call can skip the build
tar czf - -C $(dirname "$SERVER") llama-server | split -b 15M - $OUT/llama-server-cuda.tgz.part-
ls -la $OUT; say "done"
