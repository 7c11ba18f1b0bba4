#!/usr/bin/env bash
# Bring back the engines' compile caches this machine wrote, for job-caches.sh to put in
# place in a later session: a machine that has run an engine on a model before keeps them,
# a lent machine starts bare each session. What they hold: vLLM's torch.compile artefacts
# and FlashInfer autotune results (~/.cache/vllm: a cold vLLM start spent 37 s compiling,
# a start that found them 5.9 s), the Triton kernels vLLM and SGLang compile for the fused
# MoE and Inductor's graphs (~/.triton/cache), FlashInfer's JIT modules (~/.cache/flashinfer).
# Usage, as its own call right after the sweep's last call (the machine still held):
#   bash scripts/h200/pack-caches.sh $OUT            # FROM=4, FROM=8, ... for more parts
# The caches are packed once (in /tmp/xo/ecache-pack: every call brings back parts of the
# same archive): ecache.tgz.part-* of 15 MiB (the device tool brings back files of at most
# 16 MiB, 8 files and 64 MiB a call), ecache.sha256 (one line per part), ecache.gpu (the
# card it was made on: job-caches.sh refuses another) and ecache.du (each folder's size).
# Each call copies those three and at most 4 parts from the FROM-th (0 first), and says
# which FROM the next call takes. XO_HOME, XO_W, XO_GPU (tests only) stand for $HOME,
# /tmp/xo and the card; CACHE_DIRS for the folders, relative to $HOME.
set -uo pipefail
O=${1:?usage: pack-caches.sh OUTDIR}; H=${XO_HOME:-$HOME}; P=${XO_W:-/tmp/xo}/ecache-pack
FROM=${FROM:-0}; EACH=4; PART=${PART:-15M}  # PART: tests only
# REPACK=1: pack again (another CACHE_DIRS, e.g. .cache/vllm alone when the whole is many
# parts: vLLM's torch.compile cache is most of a start's saving, 37 s of 159 s)
[ "${REPACK:-0}" = 1 ] && rm -rf "$P"
if [ ! -f "$P/ecache.sha256" ]; then
  DIRS=${CACHE_DIRS:-.cache/vllm .triton/cache .cache/flashinfer}
  have=(); for d in $DIRS; do [ -d "$H/$d" ] && have+=("$d"); done
  [ ${#have[@]} -gt 0 ] || { echo "caches: none of $DIRS under $H"; exit 2; }
  rm -rf "$P" && mkdir -p "$P"
  (cd "$H" && du -sh "${have[@]}") > "$P/ecache.du"
  GPU=${XO_GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
  echo "${GPU:-unknown}" > "$P/ecache.gpu"
  tar czf - -C "$H" "${have[@]}" | split -b "$PART" - "$P/ecache.tgz.part-" \
    || { echo "caches: pack failed"; rm -rf "$P"; exit 3; }
  (cd "$P" && sha256sum ecache.tgz.part-*) > "$P/ecache.sha256"
fi
mapfile -t parts < <(awk '{print $2}' "$P/ecache.sha256")
n=${#parts[@]}
[ "$FROM" -lt "$n" ] || { echo "caches: FROM=$FROM, but there are $n part(s)"; exit 2; }
mkdir -p "$O" && cp "$P/ecache.sha256" "$P/ecache.gpu" "$P/ecache.du" "$O"/
for p in "${parts[@]:$FROM:$EACH}"; do cp "$P/$p" "$O"/; done
to=$(( FROM + EACH < n ? FROM + EACH : n ))
echo "caches ($(cat "$P/ecache.gpu"); $(tr '\n' ' ' < "$P/ecache.du")): parts $(( FROM + 1 ))-$to of $n here$( [ $to -lt $n ] && echo "; next call: FROM=$to")"
