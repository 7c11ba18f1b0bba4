"""The calibration server's settings: latency model, lengths, faults; built once at the edge.

Latency model (``active`` counts the *other* generation requests in flight, so a lone
request sees exactly ``ttft_ms`` and ``itl_ms``):

* TTFT = ``ttft_ms + ttft_per_stream_ms * active + ttft_per_prompt_token_ms * prompt_tokens``
* per-token gap = ``itl_ms + itl_per_stream_ms * active``
* the first token goes out alone; later tokens in chunks of ``tokens_per_chunk``, each
  chunk sent when its last token is due, so the per-token gap stays exact.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from crossover.errors import UsageError, validation_line

FaultName = Literal[
    "short_completion",
    "long_completion",
    "finish_reason",
    "role_chunk",
    "multi_token_chunks",
    "usage_missing",
    "usage_mismatch",
    "prompt_tokens_mismatch",
    "http_500",
    "http_429",
    "stall",
    "cut",
    "reset",
    "connection_close",
    "malformed_json",
    "slow_headers",
    "never_answer",
    # the request read, the connection closed before any response: FIN, or RST
    "drop_request",
    "drop_request_rst",
    # llama-server's habit: the connection closed after each streamed response though
    # its headers keep it alive, the FIN ``close_after_stream_ms`` late; a request that
    # arrives before it is read and never answered (cpp-httplib's drain before its close)
    "close_after_stream",
    "split_events",
    # counts a second witness contradicts
    "usage_inflated",
    "usage_inflated_2pct",
    "prompt_tokens_short",
    # protocol deviations
    "not_streamed",
    "content_type",
    "error_event",
    "undecodable",
    "oversized_event",
    "data_after_done",
    # what the stream says, against usage: no witness may be left unread
    "whitespace_chunks",
    "extra_choice",
    "choices_per_event",
    "prompt_tokens_inflated",
    "usage_total_mismatch",
    "data_after_finish",
    "logprobs",
    "token_ids",
    # honest streams whose characters span tokens (vLLM's "" then the character)
    "split_characters",
    # the engine's counter: reset as the request starts (a new _created), and tokens of
    # another model served by the same server in a series of its own
    "counter_reset",
    "other_model_tokens",
    # when it is delivered
    "burst_delivery",
    "heartbeats",
    "heartbeat_stall",
    # honest forms of the same stream (the SSE and JSON specifications allow each)
    "cr_lines",
    "crlf_lines",
    "sse_variety",
    "no_final_blank_line",
    "null_fields",
    "float_ints",
    "unknown_fields",
    "repeated_done",
    "no_done",
]
FAULT_NAMES: tuple[str, ...] = get_args(FaultName)


class FaultSpec(BaseModel):
    """One switchable fault, applied to ``fraction`` of the generation requests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: FaultName
    fraction: float = Field(default=1.0, gt=0.0, le=1.0)

    def applies_to(self, index: int) -> bool:
        """Whether request number ``index`` (0-based) gets this fault.

        Exact and deterministic: of the first ``n`` requests, ``floor(n * fraction)`` get
        it, spread evenly (fraction 0.25 hits requests 3, 7, 11, ...).
        """
        f = Fraction(str(self.fraction))
        return int((index + 1) * f) > int(index * f)


class CalibrationConfig(BaseModel):
    """Everything the calibration server does; defaults describe a well-behaved engine."""

    # an infinite delay is a server that never answers (--itl-ms inf served nothing, silently)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model_name: str = "calibration"
    #: the version ``GET /version`` answers, as vLLM's and SGLang's do (None: no such path,
    #: 404): a stand-in for an engine whose version a sweep keeps with its runs
    version: str | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: object) -> object:
        """A number is its text (``version: 0.7`` in YAML), as a server answers it."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return str(value) if number else value

    # latency model
    ttft_ms: float = Field(default=10.0, ge=0.0)
    ttft_per_stream_ms: float = Field(default=0.0, ge=0.0)
    ttft_per_prompt_token_ms: float = Field(default=0.0, ge=0.0)
    #: a prefix cache of blocks of this many prompt tokens (None: no cache): cached tokens
    #: cost no prefill time and are reported in usage.prompt_tokens_details.cached_tokens
    prefix_cache_block_tokens: int | None = Field(default=None, ge=1)
    itl_ms: float = Field(default=5.0, ge=0.0)
    itl_per_stream_ms: float = Field(default=0.0, ge=0.0)
    tokens_per_chunk: int = Field(default=1, ge=1)
    # lengths and tokenizer
    default_max_tokens: int = Field(default=16, ge=1)
    natural_length_tokens: int | None = Field(
        default=None,
        ge=1,
        description="stop here (finish_reason 'stop') unless ignore_eos/min_tokens force more; "
        "None honours max_tokens fully",
    )
    chat_template_tokens: int = Field(default=10, ge=0)
    #: and this many more per message after the first (a role header, as real templates
    #: add per message: a multi-turn history costs more template the longer it is)
    chat_message_tokens: int = Field(default=0, ge=0)
    token_text: str = " tok"  # noqa: S105 (text of one generated token, not a secret)
    stream_usage_always: bool = Field(
        default=False, description="usage in the final chunk even without include_usage"
    )
    # faults and their parameters
    faults: list[FaultSpec] = Field(default_factory=list)
    stall_s: float = Field(default=5.0, ge=0.0)
    slow_headers_s: float = Field(default=2.0, ge=0.0)
    role_chunk_delay_ms: float = Field(default=20.0, ge=0.0)
    long_completion_extra_tokens: int = Field(default=4, ge=1)
    usage_mismatch_delta: int = Field(default=1)
    prompt_tokens_extra: int = Field(default=3, ge=1)
    split_event_bytes: int = Field(default=7, ge=1)
    burst_tokens: int = Field(default=8, ge=1)
    heartbeat_ms: float = Field(default=50.0, gt=0.0)
    usage_total_extra: int = Field(default=100)
    oversized_event_bytes: int = Field(default=2 * 1024 * 1024, ge=1)
    close_after_stream_ms: float = Field(default=20.0, ge=0.0)
    # ground truth kept for GET /calibration/truth
    truth_max_requests: int = Field(default=100_000, ge=0)

    def faults_for(self, index: int) -> frozenset[str]:
        """Names of the faults that request number ``index`` gets."""
        return frozenset(f.name for f in self.faults if f.applies_to(index))


def parse_fault(text: str) -> FaultSpec:
    """``NAME`` or ``NAME:FRACTION`` as given to ``--fault``."""
    name, sep, frac = text.partition(":")
    name = name.strip()
    if name not in FAULT_NAMES:
        raise UsageError(f"unknown fault {name!r}; known: {', '.join(FAULT_NAMES)}")
    fraction = 1.0
    if sep:
        try:
            fraction = float(frac)
        except ValueError:
            raise UsageError(f"--fault {text!r}: fraction must be a number in (0, 1]") from None
    if not 0.0 < fraction <= 1.0:
        raise UsageError(f"--fault {text!r}: fraction must be in (0, 1]")
    return FaultSpec.model_validate({"name": name, "fraction": fraction})


def build_config(base: dict[str, object] | None = None, **overrides: object) -> CalibrationConfig:
    """Validate settings (a config file's mapping, then flag overrides); UsageError if bad."""
    data: dict[str, object] = dict(base or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    faults = data.get("faults")
    if isinstance(faults, list):
        # a config file may list faults as "NAME[:FRACTION]" strings, like --fault
        data["faults"] = [parse_fault(f) if isinstance(f, str) else f for f in faults]
    try:
        return CalibrationConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"bad calibration config: {validation_line(exc)}") from None


def load_config_file(path: Path) -> dict[str, object]:
    """Read a YAML (or JSON) mapping of ``CalibrationConfig`` fields."""
    from crossover.files import read_yaml

    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config {path} must be a mapping of settings")
    return {str(k): v for k, v in data.items()}
