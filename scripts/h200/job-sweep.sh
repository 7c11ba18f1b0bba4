#!/usr/bin/env bash
# H200: install vLLM (once per machine), wait for job-start.sh's build and checkpoints,
# then run (or resume) one sweep until END seconds into this call, and bring back its
# database and logs. Usage (from the repository root on the device):
#   bash scripts/h200/job-sweep.sh CONFIG NAME [sweep flags, e.g. --only vllm,vllm-fp8]
# CMD=decide runs `crossover decide` on the config instead (its flags after NAME).
# NEED_LLAMA=0 when no llama.cpp target runs: start as soon as the checkpoints exist, while
# the CUDA build finishes at low priority (job-background.sh).
# transformers targets need NEED_VLLM=1 (the default): transformers serve needs its serving
# extra (fastapi, uvicorn, openai, ...), which the vLLM install brings.
# carry: [".pack"] when .pack/NAME.tar.gz holds the sweep folder an earlier call brought
# back (cat NAME.tgz.part-* > .pack/NAME.tar.gz): it is unpacked first and the sweep
# resumes (finished levels are not re-run). RESULTS=docs/results/h200/vllm-a resumes from
# the committed database instead.
# HIDE_MOE_CONFIGS=1: every tuned fused-MoE config vLLM ships for this GPU
# (fused_moe/configs/*device_name=NVIDIA_H200*) is moved aside for this sweep, so vLLM runs
# its default tiles as on a GPU nobody tuned for (its log then says "Using default MoE
# config"); they are put back when the sweep ends, and at the start of any call without it.
# DEADLINE=epoch seconds: stop there instead of END seconds into this call (several sweeps
# in one call, scripts/h200/job-moe-tuning.sh).
# DETACH=1: the sweep (or decision) runs detached (setsid: it outlives this call while the
# machine stays held) with its multicast guard, and this call only watches it until END,
# then brings back a consistent snapshot of its folder (the database copied through
# SQLite's backup) and leaves it running. The next call with the same NAME attaches to it
# (never a second run: one without DETACH=1 is refused, exit 6) and packs again; the one
# after it ended packs its end. A machine taken back then loses only what came after the
# last call's snapshot, and the sweep resumes from it (carry .pack/NAME.tar.gz). Calls
# back to back: the machine is given back after 30 s idle.
set -uo pipefail
CONFIG=$1; NAME=$2; shift 2
T0=$(date +%s); END=${END:-560}
[ -n "${DEADLINE:-}" ] && END=$(( DEADLINE - T0 ))
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*"; }
ROOT=$(pwd); W=${XO_W:-/tmp/xo}  # XO_W: tests only
# a fresh machine (the held one was taken back between calls) has nothing staged: say so
# at once rather than wait minutes for a build and checkpoints that will never come
if [ ! -f $W/background.log ]; then
  echo "no staging on this machine (a fresh one?): run job-start.sh and the chunks first"; exit 3
fi
# a detached run of NAME still going: DETACH=1 attaches to it; without, this call would
# start a second run on its folder and GPU (a second engine beside the first's): refused,
# exit 6, before anything is copied or changed
RUNNING=0
[ -f $W/$NAME/.pid ] && [ ! -f $W/$NAME/.rc ] && kill -0 "$(cat $W/$NAME/.pid)" 2>/dev/null && RUNNING=1
if [ $RUNNING = 1 ] && [ "${DETACH:-0}" != 1 ]; then
  echo "$NAME's detached run (pid $(cat $W/$NAME/.pid)) is still going: repeat this call with DETACH=1 to attach to it"
  exit 6
fi
mkdir -p $W/bin
export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$W/src
export PATH=$W/bin:/opt/torch/.venv/bin:$PATH HF_HUB_OFFLINE=1
# never NVLink multicast on these shared machines (the vLLM adapter sets these too)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# a detached run of NAME still going reads its modules from $W/src: leave them as they are
[ $RUNNING = 1 ] || { rm -rf $W/src && cp -r $ROOT/src $W/src; }
XO="python3 -m crossover"
# a detached install (job-chunk.sh with INSTALL=1): wait for it unless NEED_VLLM=0
# (a llama.cpp-only call measures while it finishes; the README says which levels);
# NEED_SGLANG=1 waits for SGLang's too
if [ -f $W/vllm.started ] && [ "${NEED_VLLM:-1}" = 1 ]; then
  while [ ! -f $W/vllm.done ] && [ $(el) -lt 300 ]; do sleep 3; done
  say "vLLM install: $(cat $W/vllm.done 2>/dev/null)"; grep -E "^vllm |smoke|ABORT" $W/install-vllm.log
fi
if [ -f $W/vllm.started ] && [ "${NEED_SGLANG:-0}" = 1 ]; then
  while [ ! -f $W/sglang.done ] && [ $(el) -lt 300 ]; do sleep 3; done
  say "SGLang install: $(cat $W/sglang.done 2>/dev/null)"; tail -2 $W/install-sglang.log
fi
# NEED_TRITON=1 (a triton target, scripts/h200/job-triton.sh): wait for tritonserver's
# install and the repository, then import what the model imports in the stub's environment
# (NumPy 1.26.4 first, torch and vLLM from the machine's venv): a failure shows here in
# seconds rather than after a server start. `import vllm` alone is lazy (2026-12-05 it passed
# while the engine's own modules failed under NumPy 1.26.4): import those too
if [ "${NEED_TRITON:-0}" = 1 ]; then
  [ -f $W/triton.started ] || { say "no Triton install started: run job-triton.sh first"; exit 5; }
  while [ ! -f $W/triton.done ] && [ $(el) -lt 300 ]; do sleep 3; done
  say "Triton install: $(cat $W/triton.done 2>/dev/null)"; tail -4 $W/triton-install.log
  TENV=$(python3 -c "from crossover.builds.triton import find_triton as f; i=f(); print(i.env if i else '')")
  [ -n "$TENV" ] && PYTHONPATH= timeout 240 "$TENV/bin/python" -c "import numpy, torch, vllm, sys; import vllm.engine.arg_utils, vllm.engine.async_llm_engine; print('stub env imports: python', sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'vllm', vllm.__version__, '(and its engine modules)')" 2>&1 | tail -5
fi
# vLLM's tuned fused-MoE configs: put back what an earlier sweep hid (a call killed at its
# limit never ran its trap), then hide them for this one if asked
HID=$W/hidden-moe-configs
if [ "${DETACH:-0}" = 1 ] && [ "${HIDE_MOE_CONFIGS:-0}" = 1 ]; then
  say "DETACH=1 with HIDE_MOE_CONFIGS=1: the configs would come back when this call ends"; exit 2
fi
if [ $RUNNING = 1 ]; then
  :  # a detached run is using vLLM's configs as they are: leave them
elif [ -f $W/vllm.done ]; then
  CFG=$(python3 -c "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])")/model_executor/layers/fused_moe/configs
  if ls $HID/*.json > /dev/null 2>&1; then mv $HID/*.json "$CFG"/ && say "tuned MoE configs put back"; fi
  if [ "${HIDE_MOE_CONFIGS:-0}" = 1 ]; then
    mkdir -p $HID
    trap 'mv $HID/*.json "$CFG"/ 2>/dev/null && echo "[$(el)s] tuned MoE configs put back"' EXIT
    mv "$CFG"/*device_name=NVIDIA_H200* $HID/ && say "hidden: $(ls $HID | tr '\n' ' ')"
    say "left for NVIDIA_H200: $(ls "$CFG" | grep -c 'device_name=NVIDIA_H200') files"
  fi
elif [ "${HIDE_MOE_CONFIGS:-0}" = 1 ]; then
  say "HIDE_MOE_CONFIGS=1 but vLLM is not installed"; exit 4
fi
# NEED_LLAMA=0 (no llama.cpp target in --only): wait for the checkpoints, not the build
DONE=background.done; [ "${NEED_LLAMA:-1}" = 0 ] && DONE=checkpoints.done
while [ ! -f $W/$DONE ] && [ $(el) -lt 420 ]; do sleep 5; done
say "background: $(tr '\n' ';' < $W/background.log)"
if [ ! -x $W/bin/llama-server ]; then
  S=$(python3 -c "from crossover.builds.llamacpp import find_llama_server as f; print(f(cuda=True) or '')")
  [ -n "$S" ] && ln -sf "$S" $W/bin/llama-server || { say "no CUDA llama-server"; tail -20 $W/build.log; }
fi
mkdir -p $W/$NAME
if [ -f .pack/$NAME.tar.gz ] && [ ! -f $W/$NAME/.resumed ]; then
  tar xzf .pack/$NAME.tar.gz -C $W && touch $W/$NAME/.resumed && say "resuming $NAME"
fi
# or the database committed under docs/results/h200/ (RESULTS=folder), when none is here
if [ ! -f $W/$NAME/sweep.db ] && [ -n "${RESULTS:-}" ] && [ -f $RESULTS/sweep.db.xz ]; then
  xz -dc $RESULTS/sweep.db.xz > $W/$NAME/sweep.db && say "resuming $NAME from $RESULTS"
fi
# WARM_IMPORTS=1: import each engine's server modules once before the clock starts, so the
# first engine start is not also the machine's first read of its files (a cold vLLM start
# took 159 s, a second one 101 s; SGLang is installed without .pyc). What a user's machine
# that has run the engine before already has; the decision's GPU time is then its own.
if [ "${WARM_IMPORTS:-0}" = 1 ] && [ $RUNNING = 0 ]; then
  ( timeout 150 python3 -c "import vllm.entrypoints.openai.api_server" > $W/warm-vllm.log 2>&1; echo "vllm imports rc=$?" ) &
  ( PYTHONPATH=/root/ovl:/root/sgl timeout 150 python3 -c "import sglang.srt.entrypoints.http_server" > $W/warm-sglang.log 2>&1; echo "sglang imports rc=$?" ) &
  wait; say "engine imports warmed"
fi
left=$(( END - $(el) ))
if [ "${CMD:-sweep}" = decide ]; then  # crossover decide over the same config (docs/decide.md)
  RUNCMD=($XO decide --config $CONFIG --out $W/$NAME --json $W/$NAME/decision.json --allow-invalid "$@")
else
  RUNCMD=($XO sweep --config $CONFIG --out $W/$NAME --allow-invalid --no-report "$@")
fi
# multicast guard: engine log lines (not crossover's launch header) naming mnnvl/NVLS
multicast() {
  grep -hv '^# crossover-launch:' $W/$NAME/engines/*.log 2>/dev/null | grep -qiE 'mnnvl|NVLS (is )?enabled'
}
stop_gpu() {  # whatever still holds the GPU, by PID (never by name: a pattern can match a caller)
  for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill -9 "$p"; done
}
if [ "${DETACH:-0}" = 1 ]; then
  if [ $RUNNING = 1 ]; then
    say "attached to $NAME's run (pid $(cat $W/$NAME/.pid)), watching for ${left}s"
  elif [ -f $W/$NAME/.rc ] && [ "${AGAIN:-0}" != 1 ]; then
    say "$NAME ended before (rc $(cat $W/$NAME/.rc)): packing it (AGAIN=1 resumes it)"
  else
    rm -f $W/$NAME/.rc
    say "${CMD:-sweep} $CONFIG -> $NAME, detached: $*"
    export -f multicast stop_gpu; export W NAME
    setsid nohup bash -c '
      "$@" > $W/$NAME/sweep-'$T0'.log 2>&1 & SW=$!; echo $SW > $W/$NAME/.pid
      while kill -0 $SW 2>/dev/null; do
        if multicast; then echo "MULTICAST in an engine log: stopping" >> $W/$NAME/sweep-'$T0'.log
          kill -TERM $SW; sleep 5; stop_gpu; break; fi
        sleep 3
      done
      wait $SW; echo $? > $W/$NAME/.rc' _ "${RUNCMD[@]}" > $W/$NAME/detach.log 2>&1 < /dev/null &
    for _ in $(seq 20); do [ -f $W/$NAME/.pid ] && break; sleep 0.5; done
  fi
  while [ ! -f $W/$NAME/.rc ] && [ $(el) -lt $END ]; do sleep 3; done
  if [ -f $W/$NAME/.rc ]; then say "$NAME ended: rc=$(cat $W/$NAME/.rc)"
  else say "time: $NAME still running (its snapshot follows; the next call attaches)"; fi
  LOG=$(ls -t $W/$NAME/sweep-*.log 2>/dev/null | head -1); [ -n "$LOG" ] && tail -40 "$LOG"
else
  say "sweep $CONFIG -> $NAME for ${left}s: $*"
  "${RUNCMD[@]}" > $W/$NAME/sweep-$T0.log 2>&1 &
  SW=$!
  while kill -0 $SW 2>/dev/null; do
    if multicast; then say "MULTICAST in an engine log: stopping"; kill -TERM $SW; sleep 5; stop_gpu; break; fi
    [ $(el) -ge $END ] && { say "time: stopping the sweep (it resumes)"; kill -TERM $SW; }
    sleep 3
  done
  wait $SW; say "sweep rc=$?"
  tail -40 $W/$NAME/sweep-$T0.log
fi
# anything still on the GPU after the sweep stopped its engines (a hosted engine's
# processes outliving tritonserver would show here)
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
# which fused-MoE config and backend each vLLM target used, and llama.cpp's offload lines
( cd $W/$NAME/engines 2>/dev/null && grep -HE "Using configuration from|Using default MoE config|MoE backend|Fp8MoeBackend|model buffer size|n_threads|offload|CPU_REPACK" *.log | cut -c1-260 | sort -u )
# a consistent snapshot of the folder (a detached run may still be writing it): the
# database through SQLite's backup, the rest as it is, without the run's .pid and .rc (a
# carried pack resumes, never reads as a run that ended)
SNAP=$W/snap; rm -rf $SNAP && mkdir -p $SNAP
tar cf - -C $W --exclude="$NAME/sweep.db" --exclude="$NAME/sweep.db-wal" --exclude="$NAME/sweep.db-shm" \
  --exclude="$NAME/.pid" --exclude="$NAME/.rc" --exclude="$NAME/.crossover.lock" $NAME | tar xf - -C $SNAP
[ -f $W/$NAME/sweep.db ] && python3 -c "
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1], timeout=60), sqlite3.connect(sys.argv[2])
src.backup(dst); dst.close(); src.close()" $W/$NAME/sweep.db $SNAP/$NAME/sweep.db
cp $W/triton-install.log $W/install-vllm.log $W/install-sglang.log $W/install.log $W/background.log $W/build.log $W/synth-*.log $W/host.txt $W/host.json $SNAP/$NAME/ 2>/dev/null
# the device tool brings back files of at most 16 MiB: split (cat the parts to unpack)
# (packed aside first: a later sweep of the same call replaces every part, never half of them)
rm -rf $W/pack && mkdir -p $W/pack && tar czf - -C $SNAP $NAME | split -b 15M - $W/pack/$NAME.tgz.part- \
  && rm -f $OUT/$NAME.tgz.part-* && mv $W/pack/* $OUT/
ls -la $OUT; say "done"
