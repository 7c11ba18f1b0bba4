#!/usr/bin/env bash
# Detached part of job-start.sh: build + checkpoints (MOE=1: the MoE ones); writes /tmp/xo/checkpoints.done when
# both checkpoints are written and /tmp/xo/background.done when the build has finished too.
# The build runs at nice 19 on cores 4 and up, so a sweep of vLLM/transformers targets can start
# while it finishes (job-sweep.sh with NEED_LLAMA=0) with the engines' threads ahead of it.
set -uo pipefail
W=/tmp/xo; export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$W/src
XO="python3 -m crossover"
T0=$(date +%s)
PIN=""; command -v taskset > /dev/null && [ "$(nproc)" -ge 8 ] && PIN="taskset -c 4-$(( $(nproc) - 1 ))"
# BUILD_FAST=1: the build at normal priority on every core (-j nproc), to be done before the
# first measurement rather than beside it (job-sweep.sh then waits for it: NEED_LLAMA=1)
NICE=19; J=12
[ "${BUILD_FAST:-0}" = 1 ] && { NICE=0; J=$(nproc); PIN=""; }
if [ "${LLAMA:-1}" = 1 ] && [ -x $W/bin/llama-server ]; then
  # a binary carried by job-llbin.sh: no build (job-sweep.sh finds it on PATH)
  echo "build skipped: carried $W/bin/llama-server" >> $W/background.log
elif [ "${LLAMA:-1}" = 1 ]; then
( nice -n $NICE $PIN $XO engines install llamacpp --cuda --cuda-arch 90 -j $J -q > $W/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - T0 ))s" >> $W/background.log ) &
fi
if [ "${MOE:-0}" = 1 ]; then
  # MoE session (scripts/h200/sweep-moe-a.yaml): the Qwen3-30B-A3B shape as a config-only HF
  # folder (vLLM/SGLang load dummy weights) and a Q8_0 GGUF of all 48 layers (33 GB at
  # ~600 MB/s: a full F16 one, 61 GB, would not fit the 64 GiB disk); no dense checkpoint
  # DENSE_HF=1 beside it: the config-only Llama-3-8B folder first (a Triton sweep in
  # the same session, scripts/h200/sweep-triton.yaml)
  if [ "${DENSE_HF:-0}" = 1 ]; then
    $XO models synth --arch llama-3-8b --format hf --dtype bf16 --config-only --out $W/mh -q > $W/synth-hf.log 2>&1
    echo "hf rc=$? $(( $(date +%s) - T0 ))s"; echo done > $W/dense.done
  fi
  $XO models synth --arch qwen3-30b-a3b --config-only --dtype bf16 --out $W/moe -q > $W/synth-moe-hf.log 2>&1
  echo "moe hf rc=$? $(( $(date +%s) - T0 ))s"
  if [ "${LLAMA:-1}" = 1 ]; then
    nice -n 10 $XO models synth --arch qwen3-30b-a3b --dtype q8_0 --out $W/moeg -q > $W/synth-moe-gguf.log 2>&1
    echo "moe gguf rc=$? $(( $(date +%s) - T0 ))s"
  fi
else
# HF_CONFIG_ONLY=1: config and tokenizer only (every HF target loads dummy weights)
CO=""; [ "${HF_CONFIG_ONLY:-0}" = 1 ] && CO=--config-only
$XO models synth --arch llama-3-8b --format hf --dtype bf16 $CO --out $W/mh -q > $W/synth-hf.log 2>&1
echo "hf rc=$? $(( $(date +%s) - T0 ))s"
# DENSE_GGUF=0: build llama.cpp but write no dense GGUF
if [ "${LLAMA:-1}" = 1 ] && [ "${DENSE_GGUF:-1}" = 1 ]; then
  $XO models synth --arch llama-3-8b --format gguf --dtype f16 --out $W/mg -q > $W/synth-gguf.log 2>&1
  echo "gguf rc=$? $(( $(date +%s) - T0 ))s"
fi
fi
echo done > $W/checkpoints.done
wait
echo done > $W/background.done
