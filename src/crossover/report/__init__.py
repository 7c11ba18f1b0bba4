"""The sweep report (HTML with embedded PNG charts) and ``compare``.

matplotlib (a core dependency) is imported only when charts are drawn.
"""

from __future__ import annotations

from crossover.report.compare import Comparison, compare_paths, format_table, write_compare_html
from crossover.report.html import render_html, write_report
from crossover.report.load import load_run, load_sweep

__all__ = [
    "Comparison",
    "compare_paths",
    "format_table",
    "load_run",
    "load_sweep",
    "render_html",
    "write_compare_html",
    "write_report",
]
