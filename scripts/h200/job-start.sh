#!/usr/bin/env bash
# H200 call 1 of the vLLM job (docs/results/h200/README.md, "How it was run").
# carry: [".whl", "build/xo-builds-device", ".whl-chunks/chunk10", ".pack/vocab"]
# Starts, detached (setsid: it outlives this command while the machine stays held):
# the CUDA llama-server build from the pinned source and both Llama-3-8B-shape
# checkpoints (HF bf16 folder for vLLM/transformers, F16 GGUF for llama.cpp), then
# copies this call's wheel chunk. Later calls: job-chunk.sh N, then job-sweep.sh.
# LLAMA=0: no llama.cpp this session (vLLM/transformers only): no CUDA build, no GGUF
# checkpoint, and build/xo-builds-device need not be carried (carry .pack/vocab instead).
# GGUF parts for the quality job (.gguf-parts/partNN, scripts/h200/quality/) may ride
# along in any call.
set -uo pipefail
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W /root/wheelhouse
bash scripts/h200/job-chunk.sh || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
rm -rf $W/src && cp -r $ROOT/src $W/src && cp -r $ROOT/scripts $W/scripts
SRC=$W/cache/src/llama.cpp-0.3.36; mkdir -p $SRC/models
if [ "${LLAMA:-1}" = 1 ]; then
  tar xzf build/xo-builds-device/llama-src.tar.gz -C $SRC --strip-components=1
  # a source subset without the vocab files (build/xo-builds-device, made here with the
  # models/*.gguf left out) takes Llama 3's from .pack/vocab
  # (Llama 3's for the dense shapes, Qwen2's for qwen3-30b-a3b, Llama 2's for mixtral)
  [ -f $SRC/models/ggml-vocab-llama-bpe.gguf ] || cp .pack/vocab/*.gguf $SRC/models/ || { echo "no vocab: carry .pack/vocab"; exit 1; }
else
  # the checkpoints take Llama 3's tokenizer from the pinned source's vocab file: carry
  # .pack/vocab (cp ~/.cache/crossover/src/llama.cpp-0.3.36/models/ggml-vocab-llama-bpe.gguf)
  cp .pack/vocab/*.gguf $SRC/models/ || { echo "LLAMA=0 needs .pack/vocab"; exit 1; }
fi
echo llama-cpp-python-0.3.36 > $SRC/.crossover-complete
[ -d .gguf-parts ] && bash scripts/h200/quality/job-part.sh
# the host facts a CPU-offload speed model needs (CPU, memory, PCIe link, measured host
# and PCIe bandwidth), read before the build and checkpoints load the machine; job-sweep.sh
# copies them into each sweep folder it brings back
if [ "${HOST_FACTS:-1}" = 1 ]; then
  { lscpu; echo; free -g; echo; numactl -H 2>&1; echo; nvidia-smi -q | grep -A3 -i link; } > $W/host.txt 2>&1
  timeout 120 python3 scripts/h200/host_facts.py > $W/host.json 2> $W/host.err
  cp $W/host.txt $W/host.json ${OUT:-/tmp}/ 2>/dev/null
  python3 -c "import json; d=json.load(open('$W/host.json')); print(json.dumps({k: d[k] for k in ('cpu', 'rates')}))"
fi
# the Triton job (scripts/h200/job-triton.sh): the stub environment's wheels (NumPy 1.26.4, ...)
[ -d .pack/tenv ] && mkdir -p $W/tenv && cp -f .pack/tenv/*.whl $W/tenv/ && echo "tenv: $(ls $W/tenv | wc -l) wheels"
DENSE_HF=${DENSE_HF:-0} HF_CONFIG_ONLY=${HF_CONFIG_ONLY:-0} BUILD_FAST=${BUILD_FAST:-0} LLAMA=${LLAMA:-1} DENSE_GGUF=${DENSE_GGUF:-1} MOE=${MOE:-0} setsid nohup bash $W/scripts/h200/job-background.sh > $W/background.log 2>&1 < /dev/null &
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc; df -h /tmp | tail -1; echo "background started"
