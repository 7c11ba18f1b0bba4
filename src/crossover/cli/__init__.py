"""Thin typer command line: parse, validate, call the library, map errors to exit codes."""
