"""Re-judge the re-tokenized text witness of a sweep's runs with a given tokenizer.

The H200 prefix-cache sweep of 2026-12-02 re-tokenized vLLM's streamed text with
tokenizer files that transformers 5.17 had built with GPT-2's byte-level regex in place
of Llama 3's (19% of the vocabulary's own tokens split): +22-40% over usage, every vLLM
level ``invalid``. The kept text and chunk lengths are raw fields; only the derived
counts (``stream_tokens``, ``chunk_text_tokens``) are redone with the right files and
the summaries recomputed from the records:

    python scripts/h200/rejudge_text.py SWEEP_DIR CONFIG TOKENIZER
    (TOKENIZER: e.g. `crossover models synth --arch llama-3-8b --config-only --out T`, T/hf)
"""

from __future__ import annotations

import sys
from pathlib import Path

from crossover.measure import resummarize
from crossover.metrics.witness import retokenize
from crossover.records.store import Store
from crossover.sweep.config import load_sweep_config
from crossover.sweep.driver import SweepRunner
from crossover.workload import load_tokenizer


def main(sweep_dir: Path, config: Path, tokenizer: str) -> None:
    encode = load_tokenizer(tokenizer).encode
    store = Store(sweep_dir / "sweep.db")
    redone = runs = 0
    for row in store.runs():
        records = store.records(row.run_id)
        kept = [r for r in records if r.text is not None]
        if not kept or row.status != "done":
            continue
        for r in kept:
            r.stream_tokens = r.chunk_text_tokens = None
        done: list[int] = []
        retokenize(kept, encode, done)
        for i in done:
            store.add_record(row.run_id, kept[i])
        redone += len(done)
        runs += 1
        store.finish_run(row.run_id, row.status, resummarize(store, row.run_id).to_json_dict())
    store.close()
    runner = SweepRunner(load_sweep_config(config), sweep_dir)
    runner.write_sweep_file()
    runner.close()
    print(f"re-tokenized {redone} texts in {runs} runs; wrote {sweep_dir / 'sweep.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
