"""``crossover.secrets``: a secret-named variable's or flag's value is written redacted."""

from __future__ import annotations

from crossover.secrets import REDACTED, redacted_argv, redacted_env


def test_secret_named_variables_are_redacted_and_others_kept() -> None:
    env = {"HF_TOKEN": "hf_x", "MY_API_KEY": "k", "OMP_NUM_THREADS": "1", "AUTH_X": None}
    assert redacted_env(env) == {
        "HF_TOKEN": REDACTED, "MY_API_KEY": REDACTED, "OMP_NUM_THREADS": "1", "AUTH_X": None,
    }  # fmt: skip


def test_a_secret_flag_s_value_is_redacted_in_either_form() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "sk-1", "--port", "8000", "--hf-token=hf_2"]
    assert redacted_argv(argv) == [
        "vllm", "serve", "m", "--api-key", REDACTED, "--port", "8000", f"--hf-token={REDACTED}",
    ]  # fmt: skip
    # a negative number is a value, not a flag; a flag last has nothing to hide
    assert redacted_argv(["x", "--temp", "-1", "--api-key"]) == ["x", "--temp", "-1", "--api-key"]
