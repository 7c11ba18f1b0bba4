#!/usr/bin/env bash
# Everything the device calls carry, made here (a machine with the package index) in one
# go, from the repository root: the paths are git-ignored, so a new checkout has none of
# them and a session starts with this (18 s where pip's cache is warm; 1.1 GiB where not).
#   .whl-chunks/chunk01..20  vLLM 0.26.0 + SGLang 0.5.17 wheels, sha256-locked (stage.py)
#   .whl/                    crossover's own wheels the device image lacks (its package
#                            list: /work/.library/device/KINDS.md): orjson, gguf, pydantic
#                            2.14.4 (the version vLLM brings) and theirs, for Python 3.12
#   build/xo-builds-device/llama-src.tar.gz
#                            the pinned llama.cpp source without docs/media/.github/
#                            models/*.gguf/models/templates (12 MB; same build key)
#   .pack/vocab/             the vocab file the checkpoint shape needs (VOCAB=qwen2 for
#                            the MoE shape, llama-bpe for the Llama-3 shapes, llama for
#                            Mixtral's): one file, or the call is over 64 MiB
# SGLANG=0 stages vLLM alone (10 chunks). Then the calls of job-start.sh's header.
set -euo pipefail
STAGE=${STAGE:-/tmp/xo-stage}
VOCAB=${VOCAB:-qwen2}
PY=${PY:-python3}
[ -f scripts/h200/job-start.sh ] || { echo "run from the repository root"; exit 2; }

STAGE=$STAGE TIERS=core,fallback bash scripts/h200/vllm-stage/stage_plan.sh stage > /tmp/stage-vllm.log 2>&1
args=(--vllm "$STAGE/wheels")
if [ "${SGLANG:-1}" = 1 ]; then
  $PY scripts/h200/stage/stage.py download --dir "$STAGE/sgl" > /tmp/stage-sgl.log 2>&1
  args+=(--sglang "$STAGE/sgl")
fi
rm -rf .whl-chunks
$PY scripts/h200/stage/stage.py chunks "${args[@]}" --out .whl-chunks --max-mib 58 | tail -n 1

rm -rf .whl && mkdir -p .whl
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any -d .whl \
  orjson gguf pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection \
  2> /dev/null
echo ".whl: $(ls .whl | wc -l) wheels"

SRC=$(PYTHONPATH=src $PY -c "from crossover.builds.llamacpp_source import llamacpp_source_dir
print(llamacpp_source_dir(quiet=True))")
mkdir -p build/xo-builds-device
tar czf build/xo-builds-device/llama-src.tar.gz --exclude=./docs --exclude=./media \
  --exclude=./.github --exclude='./models/*.gguf' --exclude=./models/templates -C "$SRC" .
rm -rf .pack/vocab && mkdir -p .pack/vocab && cp "$SRC/models/ggml-vocab-$VOCAB.gguf" .pack/vocab/
du -sh .whl-chunks .whl build/xo-builds-device .pack/vocab | tr '\n' ' '; echo
