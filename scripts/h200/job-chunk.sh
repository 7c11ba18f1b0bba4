#!/usr/bin/env bash
# Copy the carried vLLM wheel chunk(s) (.whl-chunks/chunkNN, made here by
# scripts/h200/vllm-stage/stage_plan.sh) into /root/wheelhouse and check their sha256.
set -uo pipefail
mkdir -p /root/wheelhouse
for d in .whl-chunks/chunk*; do
  [ -d "$d" ] || continue
  c=$(basename $d)
  cp -f $d/* /root/wheelhouse/ && (cd /root/wheelhouse && sha256sum -c --quiet $c.sha256) && echo "$c OK" || { echo "$c FAILED"; exit 1; }
done
echo "wheelhouse: $(ls /root/wheelhouse | wc -l) files, $(du -sm /root/wheelhouse | cut -f1) MiB"
[ -f /tmp/xo/background.log ] && tail -3 /tmp/xo/background.log
# INSTALL=1 (with the last chunk): install vLLM now, detached, while the CUDA build runs;
# job-sweep.sh waits for /tmp/xo/vllm.done before any target that needs vLLM.
if [ "${INSTALL:-0}" = 1 ] && [ ! -f /tmp/xo/vllm.started ]; then
  touch /tmp/xo/vllm.started
  setsid nohup bash -c 'cd /root/wheelhouse && TIER=core bash /root/wheelhouse/install_vllm.sh > /tmp/xo/install-vllm.log 2>&1; echo "rc=$?" > /tmp/xo/vllm.done' > /dev/null 2>&1 < /dev/null &
  echo "vLLM install started (detached)"
fi
exit 0
