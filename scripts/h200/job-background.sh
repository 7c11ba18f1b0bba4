#!/usr/bin/env bash
# Detached part of job-start.sh: build + checkpoints; writes /tmp/xo/background.done.
set -uo pipefail
W=/tmp/xo; export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$W/src
XO="python3 -m crossover"
T0=$(date +%s)
if [ "${LLAMA:-1}" = 1 ]; then
( $XO engines install llamacpp --cuda --cuda-arch 90 -j 14 -q > $W/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - T0 ))s" >> $W/background.log ) &
fi
$XO models synth --arch llama-3-8b --format hf --dtype bf16 --out $W/mh -q > $W/synth-hf.log 2>&1
echo "hf rc=$? $(( $(date +%s) - T0 ))s"
if [ "${LLAMA:-1}" = 1 ]; then
  $XO models synth --arch llama-3-8b --format gguf --dtype f16 --out $W/mg -q > $W/synth-gguf.log 2>&1
  echo "gguf rc=$? $(( $(date +%s) - T0 ))s"
fi
wait
echo done > $W/background.done
