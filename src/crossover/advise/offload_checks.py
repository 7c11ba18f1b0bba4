"""The CPU expert offload model against every published figure it is checked on.

    python -m crossover.advise.offload_checks

prints one markdown row per figure of ``data/offload.yaml`` (measured, predicted, error,
whether the constants were solved from it, the host memory used) and the constants
re-solved from their named figures beside the packaged ones.
"""

from __future__ import annotations

import sys

from crossover.advise import cost, moe


def markdown() -> str:
    k = cost.offload_constants()
    frac, handoff = moe.fit_offload_constants(k.fitted_to)
    lines = [
        f"constants: cpu_bandwidth_fraction {k.cpu_bandwidth_fraction:g} (refit {frac:.3f}), "
        f"handoff_us_per_layer {k.handoff_us_per_layer:g} (refit {handoff:.1f}); "
        f"solved from {', '.join(k.fitted_to)}",
        "",
        "| figure | measured tok/s | predicted | error | GPU ms | CPU ms | hand-off ms | "
        "fitted | host memory |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for c in moe.offload_checks():
        s = c.step
        lines.append(
            f"| {c.id} | {c.measured_tok_s:.1f} | {c.predicted_tok_s:.1f} | "
            f"{c.error_pct:+.1f}% | {s.gpu_ms:.2f} | {s.cpu_ms:.2f} | {s.handoff_ms:.2f} | "
            f"{'yes' if c.fitted else 'no'} | {c.host} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
