"""The Triton ``tensorrt_llm`` models as data: tensors, parameters, ensemble steps.

Tensor names and types follow TensorRT-LLM's ``triton_backend/all_models/
inflight_batcher_llm`` so that the ``model.py`` files copied from the same TensorRT-LLM
checkout find every tensor and parameter they read (the preprocessing ``model.py`` looks
up each of its outputs and the ``multimodal_model_path`` parameter at start-up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str  # TYPE_INT32, TYPE_STRING, ...
    dims: tuple[int, ...]
    optional: bool = False
    reshape: tuple[int, ...] | None = None
    ragged: bool = False


@dataclass
class Step:
    model: str
    inputs: dict[str, str]  # model tensor -> ensemble tensor
    outputs: dict[str, str]


@dataclass
class ModelConfigSpec:
    name: str
    max_batch_size: int
    inputs: list[Tensor]
    outputs: list[Tensor]
    backend: str | None = None
    platform: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    instance_count: int | None = None
    decoupled: bool | None = None
    dynamic_batching: bool = False
    steps: list[Step] = field(default_factory=list)


def _t(
    name: str,
    dtype: str,
    *dims: int,
    optional: bool = False,
    scalar: bool = False,
    ragged: bool = False,
) -> Tensor:
    return Tensor(name, f"TYPE_{dtype}", tuple(dims), optional, () if scalar else None, ragged)


def instance_counts(max_concurrency: int) -> tuple[int, int]:
    """(preprocessing, postprocessing): preprocessing runs once per request,
    postprocessing once per streamed chunk, so the latter gets twice as many."""
    pre = max(1, min(32, math.ceil(max_concurrency / 8)))
    post = max(1, min(64, math.ceil(max_concurrency / 4)))
    return pre, post


# --- the four (five) models -------------------------------------------------------

_PRE_OUTPUTS = [
    _t("INPUT_ID", "INT32", -1),
    _t("REQUEST_INPUT_LEN", "INT32", 1),
    _t("DECODER_INPUT_ID", "INT32", -1),
    _t("REQUEST_DECODER_INPUT_LEN", "INT32", 1),
    _t("BAD_WORDS_IDS", "INT32", 2, -1),
    _t("STOP_WORDS_IDS", "INT32", 2, -1),
    _t("EMBEDDING_BIAS", "FP32", -1),
    _t("REQUEST_OUTPUT_LEN", "INT32", -1),
    _t("OUT_END_ID", "INT32", 1),
    _t("OUT_PAD_ID", "INT32", 1),
    _t("OUT_PROMPT_TABLE_EXTRA_IDS", "UINT64", -1),
    _t("PIXEL_VALUES", "FP16", -1, -1, -1, -1),
    _t("ASPECT_RATIO_IDS", "INT64", -1),
    _t("ASPECT_RATIO_MASK", "INT64", -1, -1),
    _t("CROSS_ATTENTION_MASK", "INT64", -1, -1, -1),
    _t("IMAGE_SIZES", "INT64", -1, 2),
    _t("IS_VIDEO_INPUT", "BOOL", 1),
    _t("ATTENTION_MASK", "INT64", -1),
    _t("IMAGE_GRID_THW", "INT64", 3),
    _t("VISION_INPUT_ID", "INT32", -1),
]

_TRT_OUTPUTS = [
    _t("output_ids", "INT32", -1, -1),
    _t("sequence_length", "INT32", -1),
    _t("cum_log_probs", "FP32", -1),
    _t("output_log_probs", "FP32", -1, -1),
    _t("context_logits", "FP32", -1, -1),
    _t("generation_logits", "FP32", -1, -1, -1),
    _t("batch_index", "INT32", 1),
    _t("sequence_index", "INT32", 1),
    _t("context_phase_params", "UINT8", -1),
    _t("kv_cache_alloc_new_blocks", "INT32", 1),
    _t("kv_cache_reused_blocks", "INT32", 1),
    _t("kv_cache_alloc_total_blocks", "INT32", 1),
    _t("arrival_time_ns", "INT64", 1),
    _t("first_scheduled_time_ns", "INT64", 1),
    _t("first_token_time_ns", "INT64", 1),
    _t("last_token_time_ns", "INT64", 1),
    _t("acceptance_rate", "FP32", 1),
    _t("total_accepted_draft_tokens", "INT32", 1),
    _t("total_draft_tokens", "INT32", 1),
    _t("num_input_tokens", "INT32", 1),
    _t("num_output_tokens", "INT32", 1),
]

# ensemble input -> (step model, step tensor)
_ENSEMBLE_INPUTS: list[tuple[Tensor, str, str]] = [
    (_t("text_input", "STRING", 1), "preprocessing", "QUERY"),
    (_t("max_tokens", "INT32", 1), "preprocessing", "REQUEST_OUTPUT_LEN"),
    (_t("bad_words", "STRING", -1, optional=True), "preprocessing", "BAD_WORDS_DICT"),
    (_t("stop_words", "STRING", -1, optional=True), "preprocessing", "STOP_WORDS_DICT"),
    (_t("end_id", "INT32", 1, optional=True), "preprocessing", "END_ID"),
    (_t("pad_id", "INT32", 1, optional=True), "preprocessing", "PAD_ID"),
    (_t("top_k", "INT32", 1, optional=True), "tensorrt_llm", "runtime_top_k"),
    (_t("top_p", "FP32", 1, optional=True), "tensorrt_llm", "runtime_top_p"),
    (_t("temperature", "FP32", 1, optional=True), "tensorrt_llm", "temperature"),
    (_t("repetition_penalty", "FP32", 1, optional=True), "tensorrt_llm", "repetition_penalty"),
    (_t("min_tokens", "INT32", 1, optional=True), "tensorrt_llm", "min_tokens"),
    (_t("seed", "UINT64", 1, optional=True), "tensorrt_llm", "seed"),
    (_t("beam_width", "INT32", 1, optional=True), "tensorrt_llm", "beam_width"),
    (_t("stream", "BOOL", 1, optional=True), "tensorrt_llm", "streaming"),
    (
        _t("exclude_input_in_output", "BOOL", 1, optional=True),
        "tensorrt_llm",
        "exclude_input_in_output",
    ),
    (
        _t("return_num_input_tokens", "BOOL", 1, optional=True),
        "tensorrt_llm",
        "return_num_input_tokens",
    ),
    (
        _t("return_num_output_tokens", "BOOL", 1, optional=True),
        "tensorrt_llm",
        "return_num_output_tokens",
    ),
]


def preprocessing(
    max_batch: int, instances: int, tokenizer_dir: str, engine_dir: str
) -> ModelConfigSpec:
    return ModelConfigSpec(
        name="preprocessing",
        backend="python",
        max_batch_size=max_batch,
        dynamic_batching=True,
        instance_count=instances,
        inputs=[
            _t("QUERY", "STRING", 1),
            _t("DECODER_QUERY", "STRING", 1, optional=True),
            _t("REQUEST_OUTPUT_LEN", "INT32", 1),
            _t("BAD_WORDS_DICT", "STRING", -1, optional=True),
            _t("STOP_WORDS_DICT", "STRING", -1, optional=True),
            _t("EMBEDDING_BIAS_WORDS", "STRING", -1, optional=True),
            _t("EMBEDDING_BIAS_WEIGHTS", "FP32", -1, optional=True),
            _t("END_ID", "INT32", 1, optional=True),
            _t("PAD_ID", "INT32", 1, optional=True),
            _t("PROMPT_TABLE_EXTRA_ID", "UINT64", 1, optional=True),
        ],
        outputs=list(_PRE_OUTPUTS),
        parameters={
            "tokenizer_dir": tokenizer_dir,
            "add_special_tokens": "true",
            "multimodal_model_path": "",
            "gpt_model_path": engine_dir,
        },
    )


def tensorrt_llm(
    max_batch: int, engine_dir: str, *, cuda_graphs: bool, graph_cache: int
) -> ModelConfigSpec:
    s = True
    return ModelConfigSpec(
        name="tensorrt_llm",
        backend="tensorrtllm",
        max_batch_size=max_batch,
        decoupled=True,
        dynamic_batching=True,
        instance_count=1,
        inputs=[
            _t("input_ids", "INT32", -1, ragged=True),
            _t("input_lengths", "INT32", 1, scalar=s),
            _t("request_output_len", "INT32", 1, scalar=s),
            _t("end_id", "INT32", 1, optional=True, scalar=s),
            _t("pad_id", "INT32", 1, optional=True, scalar=s),
            _t("stop_words_list", "INT32", 2, -1, optional=True, ragged=True),
            _t("bad_words_list", "INT32", 2, -1, optional=True, ragged=True),
            _t("embedding_bias", "FP32", -1, optional=True, ragged=True),
            _t("beam_width", "INT32", 1, optional=True, scalar=s),
            _t("temperature", "FP32", 1, optional=True, scalar=s),
            _t("runtime_top_k", "INT32", 1, optional=True, scalar=s),
            _t("runtime_top_p", "FP32", 1, optional=True, scalar=s),
            _t("repetition_penalty", "FP32", 1, optional=True, scalar=s),
            _t("min_tokens", "INT32", 1, optional=True, scalar=s),
            _t("seed", "UINT64", 1, optional=True, scalar=s),
            _t("return_log_probs", "BOOL", 1, optional=True, scalar=s),
            _t("return_context_logits", "BOOL", 1, optional=True, scalar=s),
            _t("return_generation_logits", "BOOL", 1, optional=True, scalar=s),
            _t("return_perf_metrics", "BOOL", 1, optional=True, scalar=s),
            _t("return_num_input_tokens", "BOOL", 1, optional=True, scalar=s),
            _t("return_num_output_tokens", "BOOL", 1, optional=True, scalar=s),
            _t("exclude_input_in_output", "BOOL", 1, optional=True, scalar=s),
            _t("stop", "BOOL", 1, optional=True, scalar=s),
            _t("streaming", "BOOL", 1, optional=True, scalar=s),
        ],
        outputs=list(_TRT_OUTPUTS),
        parameters={
            "max_beam_width": "1",
            "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
            "gpt_model_type": "inflight_fused_batching",
            "gpt_model_path": engine_dir,
            "batch_scheduler_policy": "guaranteed_no_evict",
            "kv_cache_free_gpu_mem_fraction": "0.9",
            "enable_chunked_context": "true",
            "enable_kv_cache_reuse": "false",
            "exclude_input_in_output": "true",
            "cuda_graph_mode": "true" if cuda_graphs else "false",
            "cuda_graph_cache_size": str(graph_cache if cuda_graphs else 0),
        },
    )


def postprocessing(max_batch: int, instances: int, tokenizer_dir: str) -> ModelConfigSpec:
    return ModelConfigSpec(
        name="postprocessing",
        backend="python",
        max_batch_size=max_batch,
        dynamic_batching=True,
        instance_count=instances,
        inputs=[_t("TOKENS_BATCH", "INT32", -1, -1), _t("SEQUENCE_LENGTH", "INT32", -1)],
        outputs=[_t("OUTPUT", "STRING", -1)],
        parameters={"tokenizer_dir": tokenizer_dir, "skip_special_tokens": "true"},
    )


def ensemble(max_batch: int) -> ModelConfigSpec:
    pre = Step(
        "preprocessing",
        {},
        {
            "INPUT_ID": "_INPUT_ID",
            "REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN",
            "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN",
            "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
            "BAD_WORDS_IDS": "_BAD_WORDS_IDS",
            "OUT_END_ID": "_PREPROCESSOR_END_ID",
            "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID",
        },
    )
    trt = Step(
        "tensorrt_llm",
        {
            "input_ids": "_INPUT_ID",
            "input_lengths": "_REQUEST_INPUT_LEN",
            "request_output_len": "_REQUEST_OUTPUT_LEN",
            "end_id": "_PREPROCESSOR_END_ID",
            "pad_id": "_PREPROCESSOR_PAD_ID",
            "stop_words_list": "_STOP_WORDS_IDS",
            "bad_words_list": "_BAD_WORDS_IDS",
        },
        {
            "output_ids": "_TOKENS_BATCH",
            "sequence_length": "_SEQUENCE_LENGTH",
            "num_input_tokens": "num_input_tokens",
            "num_output_tokens": "num_output_tokens",
        },
    )
    post = Step(
        "postprocessing",
        {"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
        {"OUTPUT": "text_output"},
    )
    by_name = {"preprocessing": pre, "tensorrt_llm": trt}
    for tensor, model, key in _ENSEMBLE_INPUTS:
        by_name[model].inputs[key] = tensor.name
    return ModelConfigSpec(
        name="ensemble",
        platform="ensemble",
        max_batch_size=max_batch,
        inputs=[t for t, _, _ in _ENSEMBLE_INPUTS],
        outputs=[
            _t("text_output", "STRING", -1),
            _t("num_input_tokens", "INT32", 1),
            _t("num_output_tokens", "INT32", 1),
        ],
        steps=[pre, trt, post],
    )


def bls(max_batch: int, instances: int) -> ModelConfigSpec:
    return ModelConfigSpec(
        name="tensorrt_llm_bls",
        backend="python",
        max_batch_size=max_batch,
        decoupled=True,
        instance_count=instances,
        inputs=[t for t, _, _ in _ENSEMBLE_INPUTS],
        outputs=[
            _t("text_output", "STRING", -1),
            _t("cum_log_probs", "FP32", -1),
            _t("output_log_probs", "FP32", -1, -1),
            _t("context_logits", "FP32", -1, -1),
            _t("generation_logits", "FP32", -1, -1, -1),
            _t("batch_index", "INT32", 1),
            _t("sequence_index", "INT32", 1),
            _t("num_input_tokens", "INT32", 1),
            _t("num_output_tokens", "INT32", 1),
        ],
        parameters={
            "accumulate_tokens": "false",
            "tensorrt_llm_model_name": "tensorrt_llm",
            "tensorrt_llm_draft_model_name": "",
            "multimodal_encoders_name": "",
        },
    )
