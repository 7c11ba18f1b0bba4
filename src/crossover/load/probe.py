"""The prompt probe: one request outside the measured load, with a prompt of another
length, so that the server's prompt count can be seen to grow one for one with the
prompt.

On the chat endpoint the server counts the chat template's tokens too, and where the
tokenizer cannot count them (a local tokenizer applies no template) the offset between
``usage.prompt_tokens`` and the prompt's own count is known only to be constant: a
server that doubled the prompt count gives a constant offset too, when every prompt has
the same length. A prompt of half the length, sent once before the level, tells them
apart: an honest server reports the same offset for it (the template does not depend on
the prompt), one that inflates the count reports another. Its record is kept with the
warm-up (outside every figure; the engine's counter covers it), and verification
compares every offset, warm-up included (``crossover.metrics.prompts``).
"""

from __future__ import annotations

from dataclasses import replace

from crossover.load.send import PromptSender, stream_options
from crossover.records.model import RequestRecord
from crossover.spec.run import RunConfig
from crossover.transport.client import make_client
from crossover.transport.http import Timeouts
from crossover.workload import Tokenizer, synthetic_prompts

#: the probe's record index (warm-up records count from 0)
PROBE_INDEX = -1
#: its prompt's id in the run's deterministic sequence: far from any the run uses
PROBE_PROMPT_ID = 1_000_000_000


def probe_length(prompt_tokens: int) -> int | None:
    """Half the run's prompt length, where that differs from it by at least 2 tokens
    (shorter, so it fits wherever the run's prompts fit)."""
    half = prompt_tokens // 2
    return half if half >= 1 and prompt_tokens - half >= 2 else None


async def prompt_probe(
    config: RunConfig,
    tokenizer: Tokenizer,
    prompt_tokens: int,
    headers: dict[str, str],
    timeouts: Timeouts,
) -> RequestRecord | None:
    """Send one request of ``probe_length(prompt_tokens)`` prompt tokens and one output
    token; its record (a warm-up record), or None where no probe applies."""
    length = probe_length(prompt_tokens)
    if length is None:
        return None
    (prompt,) = synthetic_prompts(1, length, config.seed, tokenizer, PROBE_PROMPT_ID)
    # a warm-up record, but one token whatever the warm-up asks for
    one = config.model_copy(update={"output_tokens": 1, "warmup_output_tokens": None})
    options = replace(stream_options(config, keep_text=False), limits=timeouts)
    async with make_client(config.transport, headers, timeouts) as transport:
        rec = await PromptSender(transport, one, options).send(prompt, PROBE_INDEX, True, None)
    return rec
