#!/usr/bin/env bash
# Device: keep the carried GGUF part(s) (.gguf-parts/partNN) under /tmp/xo/gguf-parts.
set -uo pipefail
mkdir -p /tmp/xo/gguf-parts
for d in .gguf-parts/part*; do [ -d "$d" ] && cp -f "$d"/* /tmp/xo/gguf-parts/ && echo "$(basename "$d") kept"; done
ls -la /tmp/xo/gguf-parts
