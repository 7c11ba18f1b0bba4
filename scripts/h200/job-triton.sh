#!/usr/bin/env bash
# H200, the Triton job (docs/results/h200/triton/README.md): right after job-start.sh
# (which carried .pack/tenv: NumPy 1.26.4 and the stub environment's other wheels, copied
# to /tmp/xo/tenv). Each call carries one more folder of wheels: [".pack/scipy"] (SciPy
# 1.14.1, 41 MB: the stub environment's NumPy-1 build of the venv's NumPy-2-only SciPy,
# which `engines install triton --engine-python` asks for) and [".pack/tw"] (the
# nvidia-pytriton 0.7.0 wheel, 55 MB), in either order. Once both are there it starts
# scripts/h200/triton-install.sh detached: tritonserver and the stub's environment from
# that folder (`engines install triton --wheels`), then the model repository hosting vLLM.
# job-sweep.sh with NEED_TRITON=1 waits for /tmp/xo/triton.done.
set -uo pipefail
W=/tmp/xo
[ -d $W/tenv ] || { echo "no $W/tenv: run job-start.sh with .pack/tenv carried first"; exit 1; }
for d in .pack/tw .pack/scipy; do
  [ -d $d ] && cp -f $d/*.whl $W/tenv/ && echo "$d: $(ls $d)"
done
[ -f $W/triton.started ] && { echo "triton install already started"; exit 0; }
ls $W/tenv/nvidia_pytriton-*.whl > /dev/null 2>&1 || { echo "next: carry .pack/tw"; exit 0; }
ls $W/tenv/scipy-*.whl > /dev/null 2>&1 || { echo "next: carry .pack/scipy"; exit 0; }
touch $W/triton.started
# run from a copy: the next call replaces the repository tree under a running script
mkdir -p $W/ts && rm -rf $W/ts/scripts && cp -r scripts $W/ts/
setsid nohup bash $W/ts/scripts/h200/triton-install.sh > $W/triton-install.log 2>&1 < /dev/null &
echo "triton install started (detached)"
