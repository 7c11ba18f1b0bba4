"""Write docs/examples/trace-sample.jsonl: a small synthetic trace in Mooncake's format
(one JSON object per line: timestamp ms, input_length, output_length, hash_ids of 512-token
blocks). Synthetic, seeded: 40 requests over about 20 s, four conversations' worth of shared
system-prompt blocks (ids 0-3 and 10-13), the rest of each prompt its own.

    python scripts/make_sample_trace.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

rng = random.Random(2026)
out = []
t = 0.0
next_id = 100
for i in range(40):
    t += rng.expovariate(2.0) * 1000.0
    shared = [0, 1, 2, 3] if i % 2 == 0 else [10, 11, 12, 13]
    own_blocks = rng.randint(0, 3)
    ids = shared[: rng.randint(1, 4)] + list(range(next_id, next_id + own_blocks))
    next_id += own_blocks
    length = len(ids) * 512 - rng.randint(0, 511)
    out.append(
        {
            "timestamp": round(t),
            "input_length": length,
            "output_length": rng.randint(16, 400),
            "hash_ids": ids,
        }
    )
path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "trace-sample.jsonl"
path.write_text("".join(json.dumps(r) + "\n" for r in out))
print(f"{path}: {len(out)} requests over {out[-1]['timestamp'] / 1000:.1f} s")
