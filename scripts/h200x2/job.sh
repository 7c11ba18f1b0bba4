#!/usr/bin/env bash
# UNRUN (2026-11-30): written after the session's device budget was spent; nothing below
# has been executed on a GPU. The whole 2x H200 job in ONE device call (bare machine, no
# network, 10 minutes a command). Run from the repository root on the device:
#   kind: nvidia-h200-x2; carry: [".whl", "build/xo-builds-device"];
#   command: bash scripts/h200x2/job.sh
# 1. crossover commbench (NCCL all-reduce, eager + CUDA graphs, NVLink multicast OFF)
#    while llama.cpp builds with CUDA in the background (as scripts/h200/job.sh does).
# 2. synth a 29.5B-parameter Llama-3-70B-width shape (32 of its 80 layers, F16, 59 GB):
#    it fits one H200 (so --split-mode none is a baseline) and its per-token weight read
#    (~59 GB, ~14 ms on one GPU) is what a split over two GPUs can halve.
# 3. sweep llama.cpp --split-mode none (1 GPU) / layer / row (2 GPUs) at c=1,8,32,128.
# Everything lands in $OUT; an interrupted sweep resumes from the returned database.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*"; }
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W
# NVLink multicast must stay off on shared GPUs (commbench sets these itself as well)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$ROOT/src
XO="python3 -m crossover"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m | head -4

# llama.cpp source (pinned, vendored in llama-cpp-python 0.3.36) -> CUDA build, niced so
# that commbench's eager (host-bound) figures are not disturbed more than necessary
SRC=$CROSSOVER_CACHE/src/llama.cpp-0.3.36; mkdir -p $SRC
tar xzf build/xo-builds-device/llama-src.tar.gz -C $SRC --strip-components=1
echo llama-cpp-python-0.3.36 > $SRC/.crossover-complete
( nice -n 19 $XO engines install llamacpp --cuda --cuda-arch 90 -j 16 -q > $W/build.log 2>&1; echo "rc=$?" >> $W/build.log ) &
BUILD=$!

say "commbench"
timeout 150 $XO commbench --out $OUT/h200x2-commbench.json --min-size 1K --max-size 1G --factor 2 \
  2>&1 | tee $OUT/commbench.log

# the model shape: Llama-3-70B (h=8192, 64/8 heads, ffn 28672) cut to 32 layers
python3 - <<'PY'
import json, pathlib
cfg = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 32, "num_attention_heads": 64,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
    "bos_token_id": 128000, "eos_token_id": 128001, "tie_word_embeddings": False,
}
d = pathlib.Path("/tmp/xo/llama-3-70b-32l"); d.mkdir(exist_ok=True)
(d / "config.json").write_text(json.dumps(cfg))
PY
say "synth 29.5B F16 GGUF"
$XO models synth --config $W/llama-3-70b-32l/config.json --format gguf --dtype f16 --out $W/mg -q > $W/synth-gguf.log 2>&1 || cat $W/synth-gguf.log
ls -la $W/mg
say "waiting for the llama.cpp build"
wait $BUILD; tail -3 $W/build.log
SERVER=$(python3 -c "from crossover.builds.llamacpp import find_llama_server as f; print(f(cuda=True) or '')")
[ -n "$SERVER" ] || { say "llama.cpp build failed"; tail -40 $W/build.log; exit 1; }
ln -sf "$SERVER" $W/llama-server
ln -sf "$(ls $W/mg/*.gguf | head -1)" $W/model.gguf
cp $SRC/models/ggml-vocab-llama-bpe.gguf $W/vocab.gguf

END=${END:-570}
left=$(( END - $(el) ))
say "sweep split modes (${left}s)"
timeout -s INT $left $XO sweep --config scripts/h200x2/splits.yaml --out $W/sweep --allow-invalid --no-report

say "packing results"
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("/tmp/xo/sweep/sweep.db"); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()
PY
cp $W/build.log $W/synth-*.log $W/sweep/ 2>/dev/null
tar czf $OUT/results.tar.gz -C $W sweep
ls -la $OUT; say "done"
