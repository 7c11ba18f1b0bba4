#!/usr/bin/env bash
# H200, issue 39 item 5: the MoE tuning sweep (scripts/h200/sweep-moe-tuning.yaml), one
# database, its targets in an order that a file move separates. Usage, on the device after
# job-start.sh (MOE=1) and the wheel chunks (job-chunk.sh, INSTALL=1 on the last):
#   END=570 bash scripts/h200/job-moe-tuning.sh STEP...
# STEP, in the order given, each a job-sweep.sh run resuming the database on the machine:
#   tuned        vllm-bf16 with the configs vLLM ships (its log names
#                E=128,N=768,device_name=NVIDIA_H200.json)
#   default      vllm-bf16-default with every *device_name=NVIDIA_H200* config moved aside
#   fp8          vllm-fp8 (online FP8) with the shipped configs
#   fp8-default  vllm-fp8-default, configs moved aside, only if vllm-fp8's log read an H200
#                config (vLLM 0.26.0 ships none for per-tensor FP8 at this shape; its FP8 MoE
#                may not be Triton's at all): otherwise one FP8 target says all
#   llama        llama.cpp Q8_0 all on the GPU, --n-cpu-moe 48, --n-cpu-moe 24; one repeat
#                (LLAMA_REPEATS=2: a second one; the first is kept)
# Leave 45 s between END and the call's limit: a sweep stopped at END finishes the request in
# flight first (an offloaded level's requests take 10 s and more), then packs its folder.
# The whole call stops END seconds after it starts (each sweep resumes where it stopped);
# $OUT gets the sweep folder after every step, so a call cut short still brings back the
# steps it finished.
set -uo pipefail
T0=$(date +%s); export DEADLINE=$(( T0 + ${END:-570} ))
CONFIG=scripts/h200/sweep-moe-tuning.yaml; NAME=moe-tuning; W=/tmp/xo
left() { echo $(( DEADLINE - $(date +%s) )); }
sweep() { bash scripts/h200/job-sweep.sh $CONFIG $NAME "$@"; }
# a vLLM start takes 2-3 minutes: a step that cannot also measure in what is left waits
# for the next call (its start would be thrown away)
for step in "$@"; do
  need=${MIN_LEFT:-200}; [ "$step" = llama ] && need=60
  [ "$(left)" -lt "$need" ] && { echo "== $step: not started, $(left)s left"; break; }
  echo "== $step ($(left)s left)"
  case $step in
    # the first measurement waits for the llama.cpp build (BUILD_FAST=1 in job-start.sh),
    # so no target is measured beside a compiler
    tuned) NEED_LLAMA=1 sweep --only vllm-bf16 ;;
    default) NEED_LLAMA=0 HIDE_MOE_CONFIGS=1 sweep --only vllm-bf16-default ;;
    fp8) NEED_LLAMA=0 sweep --only vllm-fp8 ;;
    fp8-default)
      if grep -qE "Using configuration from .*device_name=NVIDIA_H200" $W/$NAME/engines/vllm-fp8.log 2>/dev/null; then
        NEED_LLAMA=0 HIDE_MOE_CONFIGS=1 sweep --only vllm-fp8-default
      else
        echo "vllm-fp8 read no tuned H200 config (its log):"
        grep -hE "MoE config|Fp8MoeBackend|MoE backend|Experts" $W/$NAME/engines/vllm-fp8.log | cut -c1-240 | sort -u | head -8
      fi ;;
    llama) sweep --only llamacpp-q8-gpu,llamacpp-q8-cpumoe48,llamacpp-q8-cpumoe24 --repeats ${LLAMA_REPEATS:-1} ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "== done at $(( $(date +%s) - T0 ))s"
