"""The embedded default of the main job: real llama.cpp serving a real model.

Two llama-server configurations of the real Gemma 3 270M (Q4_K_M GGUF assembled from
PyPI) that a user of a small CPU machine would weigh: one slot given both cores
(``--parallel 1 --threads 2``: each request alone, prefill and decode on two threads)
against eight slots on one core (``--parallel 8 --threads 1``: requests batched, the
other core left to the client driving eight streams). The single fast slot wins while
requests come one at a time; as they pile up its queue grows (TTFT climbs with every
waiting request) while the eight slots batch them. The sweep finds where that flips,
with an interval. (One slot against eight on the same thread count, the earlier demo,
had no crossover: eight slots led from the first level.)

transformers serve is left out of the CPU demo: it needs a PyTorch install
(several hundred MB) and Gemma as an HF folder, and would not fit the 15-minute
budget on 2 cores; the H200 results compare it (docs/results/h200/).
"""

from __future__ import annotations

from pathlib import Path

from crossover.sweep.config import SweepConfig, build_sweep_config

DEMO_LEVELS = [1, 2, 4, 8]
#: the two configurations: one slot on both cores, eight slots on one
DEMO_TARGETS = ("1-slot-2-threads", "8-slots-1-thread")


def demo_config(model: Path, server: Path, *, quick: bool = False) -> SweepConfig:
    launch = {"model": str(model), "context_tokens": 512, "executable": [str(server)]}
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
                    "name": DEMO_TARGETS[0],
                    "engine": "llamacpp",
                    # both cores to one request at a time
                    "launch": {**launch, "parallel": 1, "extra_args": ["--threads", "2"]},
                },
                {
                    "name": DEMO_TARGETS[1],
                    "engine": "llamacpp",
                    # one thread leaves the other core to the client's eight streams;
                    # llama.cpp's default on a busy 2-core machine spins its threads
                    # against the client (seen: 20x slower tokens)
                    "launch": {**launch, "parallel": 8, "extra_args": ["--threads", "1"]},
                },
            ],
        }
    )
