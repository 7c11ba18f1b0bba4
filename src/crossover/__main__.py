"""``python -m crossover`` runs the command line."""

from crossover.cli.app import entry

entry()
