#!/usr/bin/env bash
# On the H200, after every chunk of scripts/h200/stage/stage.py is in /root/wheelhouse
# (scripts/h200/job-chunk.sh copies them): join the split wheels, check every sha256
# against MANIFEST.tsv, then install both engines side by side without touching the
# machine's torch, triton, numpy or transformers:
#   vLLM 0.26.0  -> the machine's Python (install_vllm.sh written by stage_plan.sh: only
#                   projects not installed yet, --no-deps)
#   SGLang 0.5.17 -> /root/sgl (pip --target), its transformers 5.12.1 + tokenizers 0.22.2
#                   -> /root/ovl; SGLang runs with PYTHONPATH=/root/ovl:/root/sgl (the
#                   sweep YAML's env) so its versions win where the two engines differ
#                   (flashinfer, xgrammar, ...) and vLLM never sees them. Wheels identical
#                   to vLLM's core set come from the machine's Python once vLLM installed them.
# Writes /tmp/xo/vllm.done and /tmp/xo/sglang.done ("rc=N"; "rc=skipped" for a vLLM-only set).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WH=${WH:-/root/wheelhouse}; PY=${PY:-/opt/torch/.venv/bin/python3}; W=/tmp/xo; mkdir -p $W
cd "$WH" || { echo "no $WH"; exit 1; }
while IFS=$'\t' read -r whl n; do
  [ -f "$whl" ] && continue
  have=$(ls -1 "$whl".part-* 2>/dev/null | wc -l)
  [ "$have" = "$n" ] || { echo "ABORT: $whl has $have of $n parts"; exit 2; }
  cat $(ls -1 "$whl".part-* | sort) > "$whl.tmp" && mv "$whl.tmp" "$whl" && rm -f "$whl".part-*
done < PARTS.tsv
awk -F'\t' '{print $2"  "$1}' MANIFEST.tsv | sha256sum -c --quiet || { echo "ABORT: sha256"; exit 3; }
echo "sha256 OK: $(wc -l < MANIFEST.tsv) wheels"
# vLLM: its lock.tsv and installer come from stage_plan.sh (split wheels are joined already)
STAGE="$WH" bash "$ROOT/scripts/h200/vllm-stage/stage_plan.sh" remote-scripts || exit 1
( TIER=core bash "$WH/install_vllm.sh" > $W/install-vllm.log 2>&1
  echo "rc=$?" > $W/vllm.done ) &
# a vLLM-only chunk set (stage.py chunks without --sglang): nothing more to install
if ! awk -F'\t' '$3 ~ /sglang-/ {f=1} END {exit !f}' MANIFEST.tsv; then
  wait; echo "rc=skipped (no SGLang wheels in this chunk set)" > $W/sglang.done
  echo "vLLM: $(cat $W/vllm.done); SGLang: not staged"; exit 0
fi
# SGLang: its core + added tiers, less what vLLM's core tier installs into the machine's Python
awk -F'\t' '$3 ~ /sglang-(core|added)/ && $3 !~ /vllm-core/ {print $1}' MANIFEST.tsv > sglang.todo
awk -F'\t' '$3 ~ /sglang-overlay/ {print $1}' MANIFEST.tsv > sglang.overlay
(
  set -e
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/sgl $(cat sglang.todo)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/ovl $(cat sglang.overlay)
  echo "installed $(wc -l < sglang.todo) wheels in /root/sgl, $(wc -l < sglang.overlay) in /root/ovl"
) > $W/install-sglang.log 2>&1
echo "rc=$?" > $W/sglang.done.tmp
wait  # SGLang imports vLLM's shared wheels (CUTLASS DSL, ...) from the machine's Python
PYTHONPATH=/root/ovl:/root/sgl "$PY" -c "import sglang, sgl_kernel, flashinfer, transformers; print('sglang', sglang.__version__, 'flashinfer', flashinfer.__version__, 'transformers', transformers.__version__)" >> $W/install-sglang.log 2>&1 || echo "rc=9" > $W/sglang.done.tmp
mv $W/sglang.done.tmp $W/sglang.done
echo "vLLM: $(cat $W/vllm.done); SGLang: $(cat $W/sglang.done)"; tail -3 $W/install-sglang.log
