"""The embedded default of the main job: real llama.cpp serving a real model.

Two llama-server configurations a user would weigh on a small CPU machine, on the
real Gemma 3 270M (Q4_K_M GGUF assembled from PyPI): one parallel slot against
eight. Slots move the curve: with one slot requests queue (TTFT grows with load)
while each stream decodes alone; with eight they batch (more tokens/s in total,
each stream slower). The sweep finds where that trade flips, with an interval.

transformers serve is left out of the CPU demo: it needs a PyTorch install
(several hundred MB) and Gemma as an HF folder, and would not fit the 15-minute
budget on 2 cores; the H200 results compare it (docs/results/h200/).
"""

from __future__ import annotations

from pathlib import Path

from crossover.sweep.config import SweepConfig, build_sweep_config

DEMO_LEVELS = [1, 2, 4, 8]


def demo_config(model: Path, server: Path, *, quick: bool = False) -> SweepConfig:
    # one thread leaves the other core to the client; llama.cpp's default on a busy
    # 2-core machine spins its threads against the client (seen: 20x slower tokens)
    launch = {
        "model": str(model),
        "context_tokens": 512,
        "executable": [str(server)],
        "extra_args": ["--threads", "1"],
    }
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
            "targets": [
                {
                    "name": "llamacpp-1-slot",
                    "engine": "llamacpp",
                    "launch": {**launch, "parallel": 1},
                },
                {
                    "name": "llamacpp-8-slots",
                    "engine": "llamacpp",
                    "launch": {**launch, "parallel": 8},
                },
            ],
        }
    )
