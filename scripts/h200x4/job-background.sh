#!/usr/bin/env bash
# Detached part of scripts/h200x4/job-prep.sh (UNRUN, 2026-12-01): commbench on 4 GPUs,
# the 70B-wide config + tokenizer folder; writes /tmp/xo/background.done.
set -uo pipefail
W=/tmp/xo; export CROSSOVER_CACHE=$W/cache PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$W/src
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
XO="python3 -m crossover"
T0=$(date +%s)
mkdir -p $W/results
timeout 240 $XO commbench --gpus 4 --out $W/results/h200x4-commbench.json --min-size 1K \
  --max-size 1G --factor 2 > $W/results/commbench.log 2>&1
echo "commbench rc=$? $(( $(date +%s) - T0 ))s"
# the tokenizer comes with the Llama-3-8B synth (its weights are removed afterwards)
$XO models synth --arch llama-3-8b --format hf --dtype bf16 --out $W/m8 -q > $W/synth-hf.log 2>&1
mkdir -p $W/m70/hf
cp $W/m8/hf/tokenizer* $W/m8/hf/generation_config.json $W/m70/hf/
rm -rf $W/m8
python3 - <<'PY'
import json, pathlib
cfg = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 32, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "torch_dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": 128001,
    "tie_word_embeddings": False,
}
pathlib.Path("/tmp/xo/m70/hf/config.json").write_text(json.dumps(cfg, indent=1))
PY
ls $W/m70/hf; echo "model rc=$? $(( $(date +%s) - T0 ))s"
echo done > $W/background.done
