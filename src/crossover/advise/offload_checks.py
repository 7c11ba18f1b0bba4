"""The CPU expert offload model against every published figure it is checked on.

    python -m crossover.advise.offload_checks

prints one markdown row per figure of ``data/offload.yaml`` (measured, predicted, error,
whether the constants were solved from it, the host memory used) and the constants
re-solved from their named figures beside the packaged ones. With ``--model`` it predicts
a setup instead (before it is measured):

    python -m crossover.advise.offload_checks --model qwen3-30b-a3b --quant gguf-q8_0 \
        --gpu H200 --host-mem-bandwidth 120.8 --pcie-gbs 55.2 --n-cpu-moe 48,24,0 \
        --concurrency 1,4,16 --input-tokens 200
"""

from __future__ import annotations

import sys

from crossover.advise import cost, moe
from crossover.errors import UsageError, argument_parser, parse_list


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


def predict(
    model_name: str,
    quant: str,
    gpu: str,
    host: str | None,
    pcie_gbs: float | None,
    layers: list[int],
    levels: list[int],
    input_tokens: int,
) -> str:
    """Decode step (the ITL each stream sees) and the prefill's PCIe stream, per offloaded
    layer count and batch."""
    from crossover.advise.hardware import find_gpu
    from crossover.advise.model import load_model

    model = load_model(model_name)
    shape = cost.offload_shape(model, quant)
    if shape is None:
        raise UsageError(f"{model_name} is not a mixture of experts: nothing to offload")
    spec = find_gpu(gpu)
    host_gbs, how = cost.host_bandwidth(host)
    eff, step_us, seq_us = moe.offload_gpu_terms()
    lines = [
        f"{model_name} {quant} on {spec.id} ({spec.memory_bandwidth_gbs:g} GB/s), {how}, "
        f"PCIe {pcie_gbs or cost.offload_constants().pcie_gbs:g} GB/s",
        "",
        "| --n-cpu-moe | c | step ms | decode tok/s per user | GPU ms | CPU ms | hand-off ms "
        "| prefill PCIe stream ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in layers:
        stream = cost.offload_prefill_stream_ms(shape, n, input_tokens, pcie_gbs)
        for b in levels:
            s = cost.offload_step(
                shape,
                n,
                gpu_bandwidth_gbs=spec.memory_bandwidth_gbs,
                host_bandwidth_gbs=host_gbs,
                gpu_efficiency=eff,
                step_us_per_layer=step_us,
                seq_us_per_moe_layer=seq_us,
                batch=b,
                pcie_gbs=pcie_gbs,
            )
            lines.append(
                f"| {n} | {b} | {s.step_ms:.2f} | {s.tok_s_per_user:.1f} | {s.gpu_ms:.2f} "
                f"| {s.cpu_ms:.2f} | {s.handoff_ms:.2f} | {stream:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argument_parser(prog="python -m crossover.advise.offload_checks")
    p.add_argument("--model", help="predict this model instead of printing the checks")
    p.add_argument("--quant", default="gguf-q4_k_m")
    p.add_argument("--gpu", default="H200")
    p.add_argument("--host-mem-bandwidth", default=None)
    p.add_argument("--pcie-gbs", type=float, default=None)
    p.add_argument("--n-cpu-moe", default="48")
    p.add_argument("--concurrency", default="1")
    p.add_argument("--input-tokens", type=int, default=200)
    args = p.parse_args(argv)
    try:
        if args.model is None:
            sys.stdout.write(markdown())
        else:
            sys.stdout.write(
                predict(
                    args.model,
                    args.quant,
                    args.gpu,
                    args.host_mem_bandwidth,
                    args.pcie_gbs,
                    # 0 layers on the CPU is a setup (none offloaded); a batch of 0 is not
                    parse_list(args.n_cpu_moe, "--n-cpu-moe", zero=True),
                    parse_list(args.concurrency, "--concurrency"),
                    args.input_tokens,
                )
            )
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(main)
