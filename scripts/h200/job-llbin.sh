#!/usr/bin/env bash
# Optional call before job-start.sh: carry [".pack/llbin"] (46 MiB; too much beside
# job-start's own carry) holding a CUDA llama-server for sm_90 that an earlier session built
# on the device machine from the pinned source (`crossover engines install llamacpp --cuda
# --cuda-arch 90`, 325 s on 16 cores) and brought back: llbin.tgz.part-* (split tar.gz of the
# one static binary), llama-server.sha256, llbin.path (where it was built), llbin.ldd (its
# libraries: the image's CUDA 13.0 cublas/cudart under a RUNPATH, libcuda from the driver).
# It lands in /tmp/xo/bin, job-background.sh then skips the build (background.log says
# "build skipped"), and job-sweep.sh uses it (PATH) without waiting minutes for a build.
# Made by: the H100 call of 2026-12-05 (docs/results/h100/moe-warm-grid/README.md), after
# job-sweep.sh: S=$(readlink -f /tmp/xo/bin/llama-server); cd $(dirname $S) &&
#   tar czf - llama-server | split -b 15M - $OUT/llbin.tgz.part-
set -uo pipefail
B=${XO_BIN:-/tmp/xo/bin}; mkdir -p $B  # XO_BIN: tests only
[ -f .pack/llbin/llama-server.sha256 ] || { echo "no .pack/llbin: carry it"; exit 2; }
cat .pack/llbin/llbin.tgz.part-* | tar xzf - -C $B || { echo "llbin: unpack failed"; exit 3; }
(cd $B && sha256sum -c --quiet /dev/stdin < "$OLDPWD/.pack/llbin/llama-server.sha256") > /dev/null 2>&1 \
  || { echo "llbin: sha256 mismatch"; rm -f $B/llama-server; exit 4; }
missing=$(ldd $B/llama-server | grep -c "not found")
[ "$missing" = 0 ] || { ldd $B/llama-server | grep "not found"; rm -f $B/llama-server; echo "llbin: libraries missing on this image: build instead"; exit 5; }
echo "llama-server (carried, sha256 OK, libraries found): $(cut -c1-12 .pack/llbin/llama-server.sha256)"
