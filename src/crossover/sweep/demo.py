"""The embedded default of the main job: real llama.cpp serving a real model.

Two llama-server configurations of the real Gemma 3 270M (Q4_K_M GGUF assembled from
PyPI) that a user of a small CPU machine would weigh, both on one thread (the other core
is the client's): one slot, each prompt prefilled in one batch, against eight slots
with chunked prefill (``--batch-size 8 --ubatch-size 8``: a prompt goes in 8-token
pieces between the other streams' decode steps, so no stream stalls behind a long
prefill). One request at a time, the single slot's whole-prompt batch reaches the first
token sooner; as requests pile up its queue grows (TTFT climbs with every waiting
request) while the eight slots take them at once. The sweep finds where that flips,
with an interval. (One slot against eight, both prefilling whole prompts, the earlier
demo, had no crossover: eight slots led from the first level.)

Both engines stay up and each level's repeat is measured on one, then the other
(``interleave``): on a shared 2-core machine the load drifts, and measured one target
after the other that drift decided the comparison (a one-repeat run showed this
crossover, a three-repeat run measured target after target did not). Chunks of 8 rather
than 16: at one request the single slot's lead (its prompt in one batch, against 16
chunks) stands out of the machine's run-to-run spread (with 16-token chunks, measured
interleaved, the single slot's 1,090 ms against 1,340 ms was not significant).

transformers serve is left out of the CPU demo: it needs a PyTorch install
(several hundred MB) and Gemma as an HF folder, and would not fit the 15-minute
budget on 2 cores; the H200 results compare it (docs/results/h200/).
"""

from __future__ import annotations

from pathlib import Path

from crossover.sweep.config import SweepConfig, build_sweep_config

DEMO_LEVELS = [1, 2, 4, 8]
#: the two configurations: one slot, whole-prompt prefill; eight slots, chunked prefill
DEMO_TARGETS = ("1-slot", "8-slots-chunked")


def demo_config(model: Path, server: Path, *, quick: bool = False) -> SweepConfig:
    # one thread leaves the other core to the client; llama.cpp's default on a busy
    # 2-core machine spins its threads against the client (seen: 20x slower tokens)
    launch = {
        "model": str(model),
        "context_tokens": 512,
        "executable": [str(server)],
    }
    one = ["--threads", "1"]
    return build_sweep_config(
        {
            "name": "demo-gemma3-270m-cpu",
            "concurrency": [1, 2, 4] if quick else DEMO_LEVELS,
            "requests_per_concurrency": 2,
            "min_requests_per_level": 4,
            "warmup_requests": 1,
            "output_tokens": 32 if quick else 64,
            "input_tokens": 128,
            "repeats": 1 if quick else 3,
            "interleave": True,
            "targets": [
                {
                    "name": DEMO_TARGETS[0],
                    "engine": "llamacpp",
                    "launch": {**launch, "parallel": 1, "extra_args": one},
                },
                {
                    "name": DEMO_TARGETS[1],
                    "engine": "llamacpp",
                    "launch": {
                        **launch,
                        "parallel": 8,
                        "extra_args": [*one, "--batch-size", "8", "--ubatch-size", "8"],
                    },
                },
            ],
        }
    )
