#!/bin/bash
# Usage: C=256 TOK=256 T=lean bash bench/profile_lean.sh  (py-spy on PATH or PYSPY=/path/to/py-spy;
# writes /tmp/prof-$T.txt, collapsed stacks). The calibration server runs on core 1, the
# client under py-spy on core 0; the server gap is 50 ms per token.
# profile crossover run (lean) at C streams against the calibration server on core 1
C=${C:-256}; TOK=${TOK:-256}; T=${T:-lean}
cd "$(dirname "$0")/.."
PORT=18731
taskset -c 1 .venv/bin/crossover calibration-server --port $PORT --ttft-ms 5 --itl-ms 50 > /tmp/cal.log 2>&1 &
SP=$!
sleep 3
ulimit -n 8192
rm -rf /tmp/profrun
taskset -c 0 ${PYSPY:-py-spy} record -r 250 --format raw -o /tmp/prof-$T.txt -- \
  .venv/bin/python -m crossover run --url http://127.0.0.1:$PORT --model calibration --engine vllm \
  --output-tokens $TOK --input-tokens 8 --concurrency $C --requests $C --warmup 0 --transport $T \
  --out /tmp/profrun --json /tmp/profrun.json > /tmp/prof-run.log 2>&1
echo "run rc=$?"
kill $SP
tail -3 /tmp/prof-run.log
