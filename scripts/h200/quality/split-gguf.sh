#!/usr/bin/env bash
# Here (not on the device): split the real Gemma 3 270M GGUF into git-ignored parts of at
# most 60 MB (PART_BYTES), one per device call (64 MiB of carried tree per call):
#   bash scripts/h200/quality/split-gguf.sh      -> .gguf-parts/part01 .. part05
set -euo pipefail
SRC=$(.venv/bin/crossover models fetch gemma3-270m -q | tail -1)
rm -rf .gguf-parts && mkdir -p .gguf-parts/tmp
split -b ${PART_BYTES:-60000000} -d -a 2 "$SRC" .gguf-parts/tmp/gemma.gguf.
for f in .gguf-parts/tmp/gemma.gguf.*; do
  n=$(printf "%02d" $(( 10#${f##*.} + 1 ))); mkdir -p .gguf-parts/part$n; mv "$f" .gguf-parts/part$n/
done
rmdir .gguf-parts/tmp; ls -la .gguf-parts/*
