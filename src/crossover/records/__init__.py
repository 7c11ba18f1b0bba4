"""The raw per-request record (the source of truth) and its SQLite store."""

from crossover.records.model import ErrorKind, RequestRecord

__all__ = ["ErrorKind", "RequestRecord"]
