#!/usr/bin/env bash
# Second H200 call: transformers serve only, resuming the sweep database that the
# first call (job.sh) brought back. carry: [".whl", ".pack/h200"]
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*"; }
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$ROOT/src
XO="python3 -m crossover"
SRC=$CROSSOVER_CACHE/src/llama.cpp-0.3.36; mkdir -p $SRC/models
cp .pack/h200/ggml-vocab-llama-bpe.gguf $SRC/models/ && echo llama-cpp-python-0.3.36 > $SRC/.crossover-complete
$XO models synth --arch llama-3-8b --format hf --dtype bf16 --out $W/mh -q > $W/synth-hf.log 2>&1 || cat $W/synth-hf.log
say "hf model written"
cp -r .pack/h200/sweep $W/sweep
timeout -s INT ${P_END:-235} $XO sweep --config scripts/h200/transformers.yaml --out $W/sweep --allow-invalid --no-report --concurrency ${LEVELS:-1,8,64} --warmup 1
say "packing"
python3 -c "import sqlite3; d=sqlite3.connect('/tmp/xo/sweep/sweep.db'); d.execute('PRAGMA wal_checkpoint(TRUNCATE)'); d.close()"
tar czf $OUT/results2.tar.gz -C $W sweep; say done
