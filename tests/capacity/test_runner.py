"""The runner's glue to the overload detector, without a server."""

from __future__ import annotations

import pytest

from crossover.capacity import OverloadDetector
from crossover.capacity.runner import report_completions
from crossover.measure import Progress
from crossover.records.model import RequestRecord

MS = 1_000_000


def _record(**kw: object) -> RequestRecord:
    base: dict[str, object] = {
        "index": 0,
        "expected_output_tokens": 5,
        "t_send_ns": 100 * MS,
        "t_first_ns": 150 * MS,
        "t_done_ns": 190 * MS,
        "completion_tokens": 5,
    }
    return RequestRecord.model_validate({**base, **kw})


def test_completed_measured_requests_reach_the_detector_and_any_listener_still_hears() -> None:
    progress = Progress(total=None)
    heard: list[int] = []
    progress.listener = lambda r: heard.append(r.index)
    detector = OverloadDetector()
    report_completions(progress, detector)
    progress.update(_record())
    progress.update(_record(index=1, warmup=True))  # warm-up: not the level's
    progress.update(_record(index=2, error_kind="http_error"))  # failed: no pace told
    progress.update(_record(index=3, t_first_ns=None, t_done_ns=None))
    assert heard == [0, 1, 2, 3]
    assert detector.ttfts == 1 and detector.ttft_s == pytest.approx(0.05)
    assert detector.gaps == 4 and detector.seconds_per_token == pytest.approx(0.01)
    assert progress.done == 2 and progress.failed == 1
