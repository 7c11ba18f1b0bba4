"""``crossover.secrets``: a secret-named variable's or flag's value is written redacted,
and only those: a name with a word such as TOKEN or KEY, not one holding "tokens"."""

from __future__ import annotations

import pytest

from crossover.secrets import REDACTED, is_secret_name, redacted_argv, redacted_env


def test_secret_named_variables_are_redacted_and_others_kept() -> None:
    env = {"HF_TOKEN": "hf_x", "MY_API_KEY": "k", "OMP_NUM_THREADS": "1", "AUTH_X": None}
    assert redacted_env(env) == {
        "HF_TOKEN": REDACTED, "MY_API_KEY": REDACTED, "OMP_NUM_THREADS": "1", "AUTH_X": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "api-key", "api_key", "hf-token",
     "password", "DB_PASSWD", "credentials", "auth", "WANDB_APIKEY", "token"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max-num-batched-tokens", "tokenizer", "tokenizer-mode", "max-tokens", "ssl-keyfile",
     "speculative-num-draft-tokens", "skip-tokenizer-init", "OMP_NUM_THREADS", "monkey"],
)  # fmt: skip
def test_names_that_hold_no_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_a_secret_flag_s_value_is_redacted_in_either_form() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "sk-1", "--port", "8000", "--hf-token=hf_2",
            "--max-num-batched-tokens", "8192", "--tokenizer", "/p"]  # fmt: skip
    assert redacted_argv(argv) == [
        "vllm", "serve", "m", "--api-key", REDACTED, "--port", "8000", f"--hf-token={REDACTED}",
        "--max-num-batched-tokens", "8192", "--tokenizer", "/p",
    ]  # fmt: skip
    # a negative number is a value, not a flag; a flag last has nothing to hide
    assert redacted_argv(["x", "--temp", "-1", "--api-key"]) == ["x", "--temp", "-1", "--api-key"]
    # a secret-named switch: the flag after it is no value
    assert redacted_argv(["--disable-auth", "--tensor-parallel-size", "2"]) == [
        "--disable-auth", "--tensor-parallel-size", "2",
    ]  # fmt: skip
