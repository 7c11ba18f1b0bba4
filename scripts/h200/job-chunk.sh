#!/usr/bin/env bash
# Copy the carried wheel chunk(s) (.whl-chunks/chunkNN, made here by
# scripts/h200/stage/stage.py) into /root/wheelhouse and check their sha256.
set -uo pipefail
mkdir -p /root/wheelhouse
for d in .whl-chunks/chunk*; do
  [ -d "$d" ] || continue
  c=$(basename $d)
  cp -f $d/* /root/wheelhouse/ && (cd /root/wheelhouse && sha256sum -c --quiet $c.sha256) && echo "$c OK" || { echo "$c FAILED"; exit 1; }
done
echo "wheelhouse: $(ls /root/wheelhouse | wc -l) files, $(du -sm /root/wheelhouse | cut -f1) MiB"
[ -f /tmp/xo/background.log ] && tail -3 /tmp/xo/background.log
# INSTALL=1 (with the last chunk): install vLLM and SGLang now, detached
# (scripts/h200/stage/install.sh); job-sweep.sh waits for /tmp/xo/vllm.done and
# /tmp/xo/sglang.done before a target that needs them.
if [ "${INSTALL:-0}" = 1 ] && [ ! -f /tmp/xo/vllm.started ]; then
  mkdir -p /tmp/xo/s; touch /tmp/xo/vllm.started
  # run from a copy: the next call replaces the repository tree under a running script
  cp -r scripts /tmp/xo/s/
  setsid nohup bash /tmp/xo/s/scripts/h200/stage/install.sh > /tmp/xo/install.log 2>&1 < /dev/null &
  echo "vLLM + SGLang install started (detached)"
fi
exit 0
