"""crossover decide: the answer, not the grid (docs/decide.md)."""
