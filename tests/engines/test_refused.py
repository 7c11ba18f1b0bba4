"""An engine that refuses a flag as it starts (``crossover.engines.refused``): the flag
read from each parser's own line, and whether crossover added it or the user did."""

from __future__ import annotations

from pathlib import Path

from crossover.engines import registry
from crossover.engines.refused import refused_flag_note, refused_flags
from crossover.errors import UsageError

# argparse's last line, as an SGLang older than the flag writes it (launch_server.py)
SGLANG_OLD = (
    "usage: launch_server.py [-h] --model-path MODEL_PATH ...\n"
    "launch_server.py: error: unrecognized arguments: --gc-warning-threshold-secs 0.05"
)


def test_each_parsers_line_gives_its_flags() -> None:
    assert refused_flags(SGLANG_OLD) == ["--gc-warning-threshold-secs"]
    # llama-server (common/arg.cpp), as the pinned build prints it
    assert refused_flags("error: invalid argument: --no-such-flag") == ["--no-such-flag"]
    # click (transformers serve)
    assert refused_flags("Error: No such option: --compile") == ["--compile"]
    # two refused, one with its value glued on; values are not flags
    two = "x.py: error: unrecognized arguments: --a 1 --b=2 --c -1"
    assert refused_flags(two) == ["--a", "--b", "--c"]
    assert refused_flags("INFO all is well\nERROR out of memory") == []
    # CUDA's own "invalid argument" is no parser's refusal, with or without a value after
    assert refused_flags("RuntimeError: CUDA error: invalid argument") == []
    assert refused_flags("CUDA error: invalid argument: -1 (cudaErrorInvalidValue)") == []


def test_a_flag_crossover_added_says_so_and_how_to_leave_it_out() -> None:
    spec = registry.get("sglang")
    note = refused_flag_note(spec, [], SGLANG_OLD)
    assert note is not None
    assert note.startswith(
        "this SGLang does not know --gc-warning-threshold-secs, which crossover adds on its own"
    )
    assert "gc_warning_s: 0 under the target's launch leaves it out" in note


def test_a_flag_the_user_gave_is_named_as_theirs() -> None:
    spec = registry.get("sglang")
    own = "launch_server.py: error: unrecognized arguments: --gc-warning-threshold-secs 0.05"
    note = refused_flag_note(spec, ["--gc-warning-threshold-secs", "0.05"], own)
    assert (
        note
        == "this SGLang does not know --gc-warning-threshold-secs (from the target's extra_args)"
    )
    # a flag crossover renders from the target's launch settings says which setting
    vllm = registry.get("vllm")
    odd = "api_server.py: error: unrecognized arguments: --max-num-seqs 5"
    assert refused_flag_note(vllm, [], odd) == (
        "this vLLM does not know --max-num-seqs, which crossover passes for the target's "
        "launch settings (the launch's parallel)"
    )
    assert refused_flag_note(vllm, [], "Traceback ...\nValueError: bad") is None


def test_every_added_flag_is_one_the_launch_renders() -> None:
    """A spec's ``added_flags`` name flags its launch really adds (a note for a flag it
    never passes would explain nothing)."""
    from crossover.engines import engine_config
    from crossover.engines.adapters import launch_spec

    seen = 0
    for spec in registry.specs():
        if not spec.added_flags:
            continue
        model = "/m.gguf" if spec.reads_gguf else "/m"
        argv: list[str] = []
        for tp in (1, 2):  # some are added at TP > 1 only (an engine refusing TP: one)
            try:
                cfg = engine_config(engine=spec.name, model=model, tp=tp)
                argv += launch_spec(cfg, 8000, Path("/tmp")).argv
            except UsageError:
                assert tp > 1

        for flag in spec.added_flags:
            assert flag in argv, (spec.name, flag)
            seen += 1
    assert seen >= 5
