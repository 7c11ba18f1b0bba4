#!/usr/bin/env bash
# Device (after the vLLM staging of scripts/h200/ and the five job-part.sh calls): the
# real Gemma 3 270M through vLLM, BF16 (reference) against FP8 (candidate) and a second
# BF16 server (the control), scored by `crossover quality` (issue 18). The GGUF is
# reassembled and checked against its pinned sha256, converted here with
# `crossover models convert` (BF16 HF folder), and served twice on the one GPU.
# Results: $OUT/gemma3-270m-h200-vllm.{json,txt} and the engine logs.
set -uo pipefail
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
ROOT=$(pwd); W=/tmp/xo; mkdir -p $W
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$ROOT/src HF_HUB_OFFLINE=1
export PATH=/opt/torch/.venv/bin:$PATH VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import vllm" || { say "vLLM is not installed: stage it first"; exit 1; }
cat $W/gguf-parts/gemma.gguf.* > $W/gemma.gguf
WANT=$(python3 -c "from crossover.models.gemma import EXPECTED_SHA256 as s; print(s)")
echo "$WANT  $W/gemma.gguf" | sha256sum -c --quiet || { say "GGUF sha256 mismatch"; exit 1; }
[ -f $W/gemma-hf/config.json ] || python3 -m crossover models convert $W/gemma.gguf --out $W/gemma-hf -q
say "converted: $(ls $W/gemma-hf | tr '\n' ' ')"
PIDS=()
serve() {  # name port [extra vllm args]
  local name=$1 port=$2; shift 2
  vllm serve $W/gemma-hf --served-model-name gemma --host 127.0.0.1 --port $port \
    --gpu-memory-utilization 0.25 --max-model-len 4096 --max-logprobs 20 "$@" \
    > $OUT/vllm-$name.log 2>&1 &
  PIDS+=($!)
}
# stop our servers by PID (pkill -f 'vllm serve' also matches a caller whose own command
# line holds those words, and killed the caller once)
stop_servers() { kill "${PIDS[@]}" 2>/dev/null; sleep 3; }
healthy() { for p in "$@"; do
  for _ in $(seq 240); do curl -sf http://127.0.0.1:$p/health >/dev/null && break; sleep 1; done
done; }
# vLLM sizes its KV cache from the memory it sees free while it profiles: three servers
# profiling at once on one GPU left the third with "-3.59 GiB" and it died (2026-12-01).
# The two BF16 servers start together, the FP8 one once they are up.
serve bf16 18200 --dtype bfloat16
serve control 18201 --dtype bfloat16
healthy 18200 18201
serve fp8 18202 --dtype bfloat16 --quantization fp8
healthy 18202
say "servers: $(for p in 18200 18201 18202; do curl -s -o /dev/null -w '%{http_code} ' http://127.0.0.1:$p/health; done)"
grep -hiE "mnnvl|multicast" $OUT/vllm-*.log && { say "multicast in a log: stopping"; stop_servers; exit 1; }
python3 -m crossover quality --reference bf16=http://127.0.0.1:18200,engine=vllm,model=gemma \
  --candidate fp8=http://127.0.0.1:18202,engine=vllm,model=gemma \
  --candidate bf16-control=http://127.0.0.1:18201,engine=vllm,model=gemma \
  --max-tokens 200 --top-logprobs 10 --concurrency 1 \
  --json $OUT/gemma3-270m-h200-vllm.json | tee $OUT/gemma3-270m-h200-vllm.txt
say "quality rc=${PIPESTATUS[0]}"
stop_servers
python3 -m crossover verify-config $OUT/vllm-fp8.log > $OUT/verify-fp8.txt 2>&1
say done
