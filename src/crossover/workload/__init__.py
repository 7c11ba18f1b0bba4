"""Workloads: prompts with exact token counts, tokenizers, prompt files."""

from crossover.workload.datasets import dataset_prompts, read_texts
from crossover.workload.prompts import Prompt, prompt_of_row, prompt_row, synthetic_prompts
from crossover.workload.tokenizers import ServerTokenizer, Tokenizer, load_tokenizer

__all__ = [
    "Prompt",
    "ServerTokenizer",
    "Tokenizer",
    "dataset_prompts",
    "load_tokenizer",
    "prompt_of_row",
    "prompt_row",
    "read_texts",
    "synthetic_prompts",
]
