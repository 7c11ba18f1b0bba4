"""The workload part: what each request asks for (its endpoint, prompt and output
lengths, shared prefix, sessions, trace, prompt file, tokenizer and seed), and which of
those cannot go together. Run, sweep and capacity inherit it, so a length is bounded and
a combination refused the same way wherever it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from crossover.errors import FieldError, UsageError
from crossover.workload.sessions import Sessions
from crossover.workload.shape import (
    LengthDist,
    SharedPrefix,
    parse_length,
    parse_shared_prefix,
    shape_specs,
    trace_specs,
)

#: the largest output and prompt a request may ask for
MAX_OUTPUT_TOKENS = 1_000_000
MAX_INPUT_TOKENS = 10_000_000


def normalize_shape(data: Any) -> Any:
    """Lengths and prefixes in their compact forms (``crossover.workload.shape``):
    ``output_tokens: uniform:64-512`` means ``output_lengths``, and ``output_tokens``
    becomes that distribution's nominal length (its mean); the same for ``input_tokens``."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    given: dict[str, str] = {}  # the key each distribution was given under, for its errors
    for n_key, d_key in (("output_tokens", "output_lengths"), ("input_tokens", "input_lengths")):
        v = data.get(n_key)
        given[d_key] = d_key
        if isinstance(v, str) and v.strip().isdigit():
            data[n_key] = int(v)
        elif isinstance(v, str | dict):
            if data.get(d_key) is not None:
                raise ValueError(f"give {n_key} as a distribution or {d_key}, not both")
            data[d_key], data[n_key] = v, None
            given[d_key] = n_key
    for key in ("input_lengths", "output_lengths"):
        if data.get(key) is not None:
            try:
                data[key] = parse_length(data[key])
            except ValueError as exc:
                raise FieldError(given[key], str(exc)) from None
    if data.get("shared_prefix") is not None:
        try:
            data["shared_prefix"] = parse_shared_prefix(data["shared_prefix"])
        except ValueError as exc:
            raise FieldError("shared_prefix", str(exc)) from None
    out = data.get("output_lengths")
    if data.get("output_tokens") is None and isinstance(out, LengthDist):
        data["output_tokens"] = out.nominal()
    inp = data.get("input_lengths")
    if isinstance(inp, LengthDist):
        data["input_tokens"] = inp.nominal()
    return data


def trace_lengths(data: Any) -> Any:
    """With ``trace``: its mean lengths stand for it where one number is shown (the nominal
    ``input_tokens``, and ``output_tokens`` unless given; each request still gets its own)."""
    if not isinstance(data, dict) or data.get("trace") is None:
        return data
    from crossover.workload.trace import read_trace

    trace = read_trace(Path(data["trace"]))
    data = {**data, "input_tokens": trace.mean_input()}
    if data.get("output_tokens") is None:
        data["output_tokens"] = trace.mean_output()
    return data


def shape_conflict(
    *,
    trace: Path | None,
    sessions: Sessions | None,
    prompts_file: Path | None,
    input_lengths: LengthDist | None,
    output_lengths: LengthDist | None,
    shared_prefix: SharedPrefix | None,
) -> str | None:
    """Why these workload parts cannot go together (None: they can)."""
    if trace is not None and (
        prompts_file or input_lengths or output_lengths or shared_prefix or sessions
    ):
        return (
            "a trace sets every request's lengths and prefix blocks: not with a prompt file, "
            "input_lengths, output_lengths, shared_prefix or sessions"
        )
    if sessions is not None and (prompts_file or shared_prefix):
        return (
            "sessions build their prompts from their own history: not with a prompt file or "
            "shared_prefix"
        )
    if prompts_file is not None and (input_lengths or shared_prefix):
        return "input_lengths and shared_prefix shape synthetic prompts: not with a prompt file"
    if output_lengths is not None and output_lengths.dist == "dataset" and prompts_file is None:
        return "output lengths dataset:MAX are the prompt file's replies: give a prompt file"
    return None


class Workload(BaseModel):
    """The workload part of a run, a sweep or a capacity search."""

    model_config = {"extra": "forbid"}

    endpoint: Literal["completions", "chat"] = Field(
        "completions", description="completions or chat"
    )
    output_tokens: int = Field(
        ...,
        ge=1,
        le=MAX_OUTPUT_TOKENS,
        description="exactly this many tokens per request, or a distribution each request "
        "draws its own exact N from (uniform:64-512, lognormal:256,128,16-1024, ...)",
    )
    input_tokens: int | None = Field(
        200,
        ge=1,
        le=MAX_INPUT_TOKENS,
        description="prompt length in tokens, or a distribution; null with prompts_file: "
        "each prompt as written (the dataset's own lengths)",
    )
    #: per-request lengths drawn from a distribution (``crossover.workload.shape``); each
    #: request is still forced to, and verified against, its own output length
    input_lengths: LengthDist | None = Field(
        None, description="per-request prompt lengths (or give input_tokens a distribution)"
    )
    output_lengths: LengthDist | None = Field(
        None, description="per-request output lengths (or give output_tokens a distribution)"
    )
    shared_prefix: SharedPrefix | None = Field(
        None, description="PxL[:random]: P shared prefixes of L tokens before each prompt"
    )
    sessions: Sessions | None = Field(
        None,
        description="multi-turn sessions {turns: T, think_s: S}: each turn carries its "
        "session's history; concurrency and rates then count sessions",
    )
    trace: Path | None = Field(
        None,
        description="replay this Mooncake-style JSONL trace: its arrival times, lengths and "
        "shared blocks (in a sweep or capacity search, each rate is the trace's mean "
        "arrival rate scaled to it, its speed factor)",
    )
    trace_block_tokens: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="tokens per hash_ids block of the trace (Mooncake: 512)",
    )
    prompts_file: Path | None = Field(
        None, description="prompts from a JSONL or ShareGPT file instead of synthetic ones"
    )
    tokenizer: str | None = Field(
        None, description="HF tokenizer folder or GGUF file for exact prompt lengths"
    )
    seed: int = Field(0, description="seed of the prompts")

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        return trace_lengths(normalize_shape(data))

    @model_validator(mode="after")
    def _conflict(self) -> Any:
        conflict = shape_conflict(
            trace=self.trace,
            sessions=self.sessions,
            prompts_file=self.prompts_file,
            input_lengths=self.input_lengths,
            output_lengths=self.output_lengths,
            shared_prefix=self.shared_prefix,
        )
        if conflict is not None:
            raise ValueError(conflict)
        return self

    def shape(self, trace_speed: float | None = None) -> dict[str, str]:
        """The per-request shape in compact form ({} for fixed lengths and no prefix)."""
        out = shape_specs(
            input_lengths=self.input_lengths,
            output_lengths=self.output_lengths,
            shared_prefix=self.shared_prefix,
            sessions=self.sessions,
        )
        return out | trace_specs(self.trace, self.trace_block_tokens, trace_speed)


def sessions_of(turns: int | None, think_s: float | None) -> dict[str, Any] | None:
    """``--turns``/``--think-s`` as a config's ``sessions`` (one turn is no session); a
    count below 1 or a think time out of range is one line (--turns 0 and --think-s -1
    or nan passed silently as one turn)."""
    if turns is not None and turns < 1:
        raise UsageError(f"--turns {turns}: at least 1")
    if think_s is not None and not 0 <= think_s <= 3600:
        raise UsageError(f"--think-s {think_s:g}: 0 to 3600 seconds")
    if turns is None or turns < 2:
        return None
    return {"turns": turns, "think_s": think_s or 0.0}


def prompt_lengths_input(
    lengths: str | None, prompts: Path | None, input_tokens: str | None
) -> str | None:
    """``--input-tokens`` as the config gets it: None keeps a prompt file's own lengths."""
    if lengths is None or lengths == "fit":
        return input_tokens
    if lengths != "dataset":
        raise UsageError(f"--prompt-lengths: expected fit or dataset, got {lengths!r}")
    if prompts is None:
        raise UsageError("--prompt-lengths dataset goes with --prompts FILE")
    return None
