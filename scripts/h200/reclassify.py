"""Re-derive request outcomes of the 2026-11-30 H200 sweep from their raw fields.

The client of that run (commit 488d6be and before) classified a stream that ended
with a finish reason and usage but without ``data: [DONE]`` as truncated;
transformers serve sends no ``[DONE]``. The raw fields (chunk times, usage, finish
reason) are unchanged; only the derived classification is redone and the summaries
recomputed from the records: ``python scripts/h200/reclassify.py SWEEP_DIR CONFIG``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from crossover.measure import resummarize
from crossover.records.store import Store
from crossover.sweep.config import load_sweep_config
from crossover.sweep.driver import SweepRunner

OLD = "stream ended without [DONE]"


def main(sweep_dir: Path, config: Path) -> None:
    store = Store(sweep_dir / "sweep.db")
    fixed = 0
    for row in store.runs():
        changed = False
        for rec in store.records(row.run_id):
            if rec.error == OLD and rec.finish_reason is not None:
                rec.error_kind = None
                rec.error = None
                store.add_record(row.run_id, rec)
                fixed += 1
                changed = True
        if changed and row.status == "done":
            store.finish_run(row.run_id, row.status, resummarize(store, row.run_id).to_json_dict())
    store.close()
    runner = SweepRunner(load_sweep_config(config), sweep_dir)
    runner.write_sweep_file()
    runner.close()
    print(f"reclassified {fixed} requests; wrote {sweep_dir / 'sweep.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
