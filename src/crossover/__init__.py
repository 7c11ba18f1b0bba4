"""crossover: matched-work benchmarks of LLM serving engines.

Deploy engines, measure them with matched work, find where one overtakes another.
"""

__version__ = "0.1.0"
