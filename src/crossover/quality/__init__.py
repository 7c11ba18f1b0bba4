"""Quality under the same harness: a candidate engine's tokens against a reference's,
through the engines' own OpenAI-compatible APIs (``crossover quality``)."""
