"""The built-in prompt set of ``crossover quality``: 60 prompts written for this
project (no download, no licence beyond the project's), stories, explanations, lists
and code, so greedy continuations run long and varied. ``--prompts FILE`` replaces it.
"""

from __future__ import annotations

from pathlib import Path

from crossover.errors import UsageError

BUILT_IN: tuple[str, ...] = (
    "Write a short story about a lighthouse keeper.",
    "Write a short story about a river in spring.",
    "Write a short story about the first snow of the year.",
    "Write a short story about an old clockmaker.",
    "Write a short story about a market at dawn.",
    "Write a short story about a ship leaving harbour.",
    "Write a short story about a library at night.",
    "Write a short story about a mountain village.",
    "Write a short story about a bakery before opening.",
    "Write a short story about a train crossing a desert.",
    "Write a short story about a garden after rain.",
    "Write a short story about a city bridge in fog.",
    "Describe a lighthouse keeper in a few calm paragraphs.",
    "Describe a river in spring in a few calm paragraphs.",
    "Describe the first snow of the year in a few calm paragraphs.",
    "Describe an old clockmaker in a few calm paragraphs.",
    "Describe a market at dawn in a few calm paragraphs.",
    "Describe a ship leaving harbour in a few calm paragraphs.",
    "Describe a library at night in a few calm paragraphs.",
    "Describe a mountain village in a few calm paragraphs.",
    "Describe a bakery before opening in a few calm paragraphs.",
    "Describe a train crossing a desert in a few calm paragraphs.",
    "Describe a garden after rain in a few calm paragraphs.",
    "Describe a city bridge in fog in a few calm paragraphs.",
    "Write a letter from a lighthouse keeper to a friend far away.",
    "Write a letter from a river in spring to a friend far away.",
    "Write a letter from the first snow of the year to a friend far away.",
    "Write a letter from an old clockmaker to a friend far away.",
    "Write a letter from a market at dawn to a friend far away.",
    "Write a letter from a ship leaving harbour to a friend far away.",
    "Write a letter from a library at night to a friend far away.",
    "Write a letter from a mountain village to a friend far away.",
    "Write a letter from a bakery before opening to a friend far away.",
    "Write a letter from a train crossing a desert to a friend far away.",
    "Write a letter from a garden after rain to a friend far away.",
    "Write a letter from a city bridge in fog to a friend far away.",
    "Explain to a child what a day is like for a lighthouse keeper.",
    "Explain to a child what a day is like for a river in spring.",
    "Explain to a child what a day is like for the first snow of the year.",
    "Explain to a child what a day is like for an old clockmaker.",
    "Explain to a child what a day is like for a market at dawn.",
    "Explain to a child what a day is like for a ship leaving harbour.",
    "Explain to a child what a day is like for a library at night.",
    "Explain to a child what a day is like for a mountain village.",
    "Explain to a child what a day is like for a bakery before opening.",
    "Explain to a child what a day is like for a train crossing a desert.",
    "Explain to a child what a day is like for a garden after rain.",
    "Explain to a child what a day is like for a city bridge in fog.",
    "List ten ways to save water at home, with one sentence on each.",
    "Explain how a bicycle stays upright while it moves.",
    "Write step-by-step instructions for making a cup of tea.",
    "Explain the difference between weather and climate.",
    "Describe how bread rises, for someone who has never baked.",
    "Write a Python function that returns the n-th Fibonacci number, and explain it.",
    "Explain what a prime number is and give the first twenty.",
    "Summarise the water cycle in plain words.",
    "Write a dialogue between two friends planning a long walk.",
    "Explain why the sky looks blue during the day and red at sunset.",
    "Describe the rules of chess for a beginner.",
    "Write a short poem about the sea, then explain its images.",
)


def load_prompts(path: Path | None, limit: int | None = None) -> list[str]:
    """The built-in set, or one prompt per non-empty line of ``path`` (UTF-8; a line that
    is a JSON string is decoded, so prompts may hold newlines)."""
    if path is None:
        prompts = list(BUILT_IN)
    else:
        import orjson

        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--prompts {path}: cannot read it ({exc})") from None
        prompts = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if line.startswith('"'):
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise UsageError(f"--prompts {path}:{i}: not a JSON string") from None
                if not isinstance(value, str):
                    raise UsageError(f"--prompts {path}:{i}: not a JSON string")
                prompts.append(value)
            else:
                prompts.append(line)
        if not prompts:
            raise UsageError(f"--prompts {path}: no prompts in it")
    return prompts[:limit] if limit is not None else prompts
