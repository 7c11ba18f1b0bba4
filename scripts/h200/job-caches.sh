#!/usr/bin/env bash
# Optional call before job-start.sh: put in place the engines' compile caches an earlier
# session's sweep packed (KEEP_CACHES=1 in job-sweep.sh, scripts/h200/pack-caches.sh), so
# this machine's engine starts are those of a machine that has run the engines on this
# model before (a vLLM start that finds its torch.compile cache skips ~30 s of compiling).
# carry: [".pack/ecache"] (its ecache.tgz.part-*, ecache.sha256, ecache.gpu). Parts over
# 64 MiB in all go in several calls, each carrying some of them (any folder .pack/ecache*):
# each call keeps what it brought in /tmp/xo/ecache and the caches are unpacked once every
# part the sha256 list names is there and matches.
# Exit 0 placed, 2 nothing carried, 4 a part's sha256 differs (the parts are dropped),
# 5 made on another card (ANY_GPU=1 takes it anyway), 6 parts still to carry.
# XO_HOME, XO_GPU, XO_W: tests only.
set -uo pipefail
H=${XO_HOME:-$HOME}; S=${XO_W:-/tmp/xo}/ecache; mkdir -p "$S"
ls -d .pack/ecache* > /dev/null 2>&1 || { echo "no .pack/ecache: carry it"; exit 2; }
for d in .pack/ecache*; do cp "$d"/ecache.* "$S"/ 2>/dev/null; done
[ -f "$S/ecache.sha256" ] || { echo "caches: no ecache.sha256 carried"; exit 2; }
GPU=${XO_GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
MADE=$(cat "$S/ecache.gpu" 2>/dev/null)
if [ "$MADE" != "$GPU" ] && [ "${ANY_GPU:-0}" != 1 ]; then
  echo "caches: made on ${MADE:-an unknown card}, this is ${GPU:-unknown}: not placed (ANY_GPU=1 to take them)"; exit 5
fi
missing=$(cd "$S" && awk '{print $2}' ecache.sha256 | while read -r p; do [ -f "$p" ] || echo "$p"; done)
[ -z "$missing" ] || { echo "caches: $(echo "$missing" | wc -l) part(s) still to carry: $(echo $missing)"; exit 6; }
(cd "$S" && sha256sum -c --quiet ecache.sha256) > /dev/null 2>&1 \
  || { echo "caches: sha256 mismatch"; rm -f "$S"/ecache.tgz.part-*; exit 4; }
mkdir -p "$H" && cat "$S"/ecache.tgz.part-* | tar xzf - -C "$H" || { echo "caches: unpack failed"; exit 3; }
echo "caches placed (made on $MADE, sha256 OK): $(tr '\n' ' ' < "$S/ecache.du" 2>/dev/null)"
