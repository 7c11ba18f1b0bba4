"""``scripts/pooled_vs_welch.py`` on a committed grid: what docs/decide.md quotes of it
(the H200 MoE grid's rows), and that its counts add up. A change to the statistics or the
summaries that moves them fails here, and the doc must be re-run."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
MOE = ROOT / "docs" / "results" / "h200" / "moe"


def _script() -> ModuleType:
    return load_script(ROOT / "scripts" / "pooled_vs_welch.py", "pooled_vs_welch", True)


def test_the_moe_grid_reads_as_the_doc_quotes(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    assert _script().main([str(MOE), "--json", str(out)]) == 0
    rows = {r["metric"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50"}
    # three target pairs over their common levels (vLLM 1-512, SGLang 1-256, llama.cpp 1-128)
    assert {r["levels"] for r in rows.values()} == {25}
    for r in rows.values():
        # both statistics are centred on the same means: they never disagree on a sign
        assert r["opposite"] == 0
        assert r["welch"] - r["welch_only"] == r["pooled"] - r["pooled_only"]
    # docs/decide.md, "What is left": pooling adds ITL p50 leads and drops some throughput ones
    itl, tok = rows["itl_ms.p50"], rows["total_tokens_per_s"]
    assert (itl["welch"], itl["pooled"], itl["welch_only"], itl["pooled_only"]) == (9, 16, 3, 10)
    assert (tok["welch"], tok["pooled"], tok["welch_only"], tok["pooled_only"]) == (10, 11, 3, 4)


def test_a_folder_without_results_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _script().main([str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
