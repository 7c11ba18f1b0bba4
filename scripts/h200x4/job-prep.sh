#!/usr/bin/env bash
# UNRUN (2026-12-01). 4x H200, call 1 (kind nvidia-h200-x4; carry [".whl",
# ".whl-chunks/chunk14"]): install crossover's wheels, copy the chunk, then, detached,
# write the 70B-wide model folder vLLM needs with load_format: dummy (config.json + the
# Llama 3 tokenizer, no weights) and run commbench on the four GPUs with NVLink multicast
# off. Later calls: scripts/h200/job-chunk.sh per chunk (the last with INSTALL=1), then
#   END=560 bash scripts/h200/job-sweep.sh scripts/h200x4/sweep.yaml h200x4
# (job-sweep.sh waits for background.done, installs nothing twice, resumes from .pack/).
set -uo pipefail
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W /root/wheelhouse
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash scripts/h200/job-chunk.sh || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
rm -rf $W/src && cp -r $ROOT/src $W/src && cp -r $ROOT/scripts $W/scripts
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m | head -6
setsid nohup bash $W/scripts/h200x4/job-background.sh > $W/background.log 2>&1 < /dev/null &
echo "background started"
