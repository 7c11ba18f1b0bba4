#!/usr/bin/env bash
# Rehearse an H200 job script on this CPU machine before spending device time on it:
# job-sweep.sh (CMD=sweep or CMD=decide) runs against two calibration engines dressed as
# llama-server (tests/sweep/calib_engine.py, a 2 s model load each), staged as job-start.sh
# would leave /tmp/xo, so its plumbing (flags, the decide JSON, the folder packed into
# $OUT) is exercised for real. Usage, from the repository root with the venv built:
#   bash scripts/h200/rehearse.sh            # CMD=decide
#   CMD=sweep bash scripts/h200/rehearse.sh
#   DETACH=1 bash scripts/h200/rehearse.sh   # three calls: a snapshot, attached, ended
# Each rehearsal starts afresh: it removes its own folders first (its config in
# /tmp/xo-rehearse, its sweep in /tmp/xo/rehearse, its parts in /tmp/xo-out), never /tmp/xo
# as a whole (on the device machine /tmp/xo holds the staging), so it never resumes an
# earlier one (nor a committed database: RESULTS is cleared). It leaves them behind for a
# look afterwards.
set -euo pipefail
ROOT=$(pwd); R=/tmp/xo-rehearse; W=/tmp/xo; NAME=rehearse
PY=${PY:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || { echo "no $PY: make venv first"; exit 2; }
rm -rf "$R" "${W:?}/$NAME" /tmp/xo-out/"$NAME".tgz.part-*
mkdir -p $R $W /tmp/xo-out
touch $W/background.log $W/checkpoints.done $W/background.done
"$PY" - "$R" "$ROOT" <<'PY'
import json, sys
from pathlib import Path

import yaml

sys.path.insert(0, sys.argv[2])
from tests.ggufs import stand_in_gguf

d, root = Path(sys.argv[1]), Path(sys.argv[2])
targets = []
for name, latency in (
    ("fast", {"ttft_ms": 20.0, "itl_ms": 2.0, "itl_per_stream_ms": 0.8}),
    ("batched", {"ttft_ms": 40.0, "itl_ms": 6.0, "itl_per_stream_ms": 0.05}),
):
    (d / f"{name}.json").write_text(json.dumps(latency))
    stand_in_gguf(d / f"{name}.gguf")
    targets.append({
        "name": name, "model": "calibration",
        "launch": {
            "engine": "llamacpp", "model": str(d / f"{name}.gguf"),
            "executable": [sys.executable, str(root / "tests/sweep/calib_engine.py")],
            "parallel": 64, "health_timeout_s": 30,
            "env": {"CALIB_ENGINE_CONFIG": str(d / f"{name}.json"), "CALIB_ENGINE_LOAD_S": "2"},
        },
    })
cfg = {"name": "rehearse", "concurrency": [1, 4, 16], "output_tokens": 32, "repeats": 2,
       "targets": targets}
(d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
PY
job() {  # job-sweep.sh as a device call runs it, ending END seconds in
  XO_W=$W OUT=/tmp/xo-out RESULTS= CMD=${CMD:-decide} NEED_VLLM=0 NEED_LLAMA=0 END=$1 \
    PATH="$(dirname "$PY"):$PATH" bash scripts/h200/job-sweep.sh $R/cfg.yaml $NAME
}
runs_in_part() {  # the runs in the database the call brought back
  rm -rf $R/back && mkdir -p $R/back && cat /tmp/xo-out/$NAME.tgz.part-* | tar xzf - -C $R/back
  "$PY" -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from runs').fetchone()[0])" $R/back/$NAME/sweep.db
}
if [ "${DETACH:-0}" = 1 ]; then
  # DETACH=1: the first call ends while the run goes on (its snapshot comes back), the
  # second attaches to it and waits for its end, the third finds it ended
  export DETACH
  job ${FIRST_END:-10}
  echo "rehearsal: first call's snapshot holds $(runs_in_part) runs"
  job ${END:-150}
  echo "rehearsal: second call's snapshot holds $(runs_in_part) runs"
  job 5
else
  job ${END:-150}
fi
ls /tmp/xo-out/$NAME.tgz.part-* > /dev/null && echo "rehearsal: packed into /tmp/xo-out"
