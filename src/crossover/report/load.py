"""Reading sweep directories and run summaries for the report, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from crossover.analysis.schema import RUN_SCHEMA, SweepFile
from crossover.errors import UsageError, validation_line
from crossover.metrics.summary import RunSummary


def _first_error(exc: ValidationError) -> str:
    return validation_line(exc, limit=1)


def sweep_json_path(path: Path) -> Path:
    """``DIR/sweep.json`` for a directory, the file itself for a file."""
    return path / "sweep.json" if path.is_dir() else path


def load_sweep(path: Path) -> SweepFile:
    """Parse a sweep directory (or its ``sweep.json``); any problem is a UsageError."""
    if not path.exists():
        raise UsageError(f"{path}: no such sweep directory")
    file = sweep_json_path(path)
    if not file.is_file():
        if (path / "sweep.db").is_file():  # a sweep stopped before its first level ended
            raise UsageError(
                f"{path}: no sweep.json yet beside its sweep.db (the sweep finished no level); "
                "the same sweep command resumes it and writes one"
            )
        raise UsageError(f"{path}: no sweep.json in this directory (is it a sweep's --out?)")
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{file}: not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema") != "crossover.sweep/1":
        raise UsageError(f'{file}: not a sweep file (expected "schema": "crossover.sweep/1")')
    try:
        return SweepFile.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(f"{file}: malformed sweep file: {_first_error(exc)}") from None


def load_run(path: Path) -> RunSummary:
    """Parse one run summary (``crossover run --json``); any problem is a UsageError."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema") != RUN_SCHEMA:
        raise UsageError(f'{path}: not a run summary (expected "schema": "{RUN_SCHEMA}")')
    try:
        return RunSummary.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(f"{path}: malformed run summary: {_first_error(exc)}") from None


def is_sweep(path: Path) -> bool:
    """A sweep directory or a sweep file (as opposed to a run summary)."""
    if path.is_dir():
        return True
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(raw, dict) and raw.get("schema") == "crossover.sweep/1"
