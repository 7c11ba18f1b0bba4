#!/usr/bin/env bash
# Quality of requantized Gemma 3 270M variants against the shipped Q4_K_M, on the CPU,
# through llama-server's own API (docs/results/quality/README.md). From the repo root:
#   bash scripts/quality/run-cpu.sh [OUT_DIR]        (about 10 minutes on 2 cores)
set -euo pipefail
OUT=${1:-docs/results/quality}
XO=${XO:-.venv/bin/crossover}
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
SERVER=$($XO engines install llamacpp -q >/dev/null 2>&1; $XO engines which llamacpp | tail -1)
REF=$($XO models fetch gemma3-270m -q | tail -1)
for t in Q8_0 Q4_0; do $XO models requantize "$REF" --type $t --out "$W/gemma-$t.gguf" -q; done
port=18180
start() {  # one slot each: llama.cpp's numerics depend on the batch (docs/results/quality)
  "$SERVER" -m "$1" --host 127.0.0.1 --port $2 -c 4096 -np 1 -t 2 > "$W/server-$2.log" 2>&1 &
  for _ in $(seq 120); do curl -sf http://127.0.0.1:$2/health >/dev/null && return; sleep 0.5; done
  echo "llama-server on $2 did not start"; tail -5 "$W/server-$2.log"; exit 1
}
start "$REF" $port; start "$W/gemma-Q8_0.gguf" $((port+1)); start "$W/gemma-Q4_0.gguf" $((port+2))
start "$REF" $((port+3))  # the control: the reference's own file on a second server
$XO quality --reference q4_k_m-shipped=http://127.0.0.1:$port,engine=llamacpp \
  --candidate q8_0-requant=http://127.0.0.1:$((port+1)),engine=llamacpp \
  --candidate q4_0-requant=http://127.0.0.1:$((port+2)),engine=llamacpp \
  --candidate q4_k_m-control=http://127.0.0.1:$((port+3)),engine=llamacpp \
  --max-tokens 200 --top-logprobs 10 --concurrency 1 --json "$OUT/gemma3-270m-cpu.json" \
  | tee "$OUT/gemma3-270m-cpu.txt"
