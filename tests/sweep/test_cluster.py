"""``--ray auto`` where no cluster runs says so in crossover's words (Ray's own message
asks for its ``--address`` flag, which crossover does not have)."""

from __future__ import annotations

import pytest

from crossover.errors import UsageError
from crossover.sweep.cluster import RayCluster


def test_auto_without_a_cluster_names_the_way_to_start_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ray = pytest.importorskip("ray")

    def refuse(**_: object) -> None:
        raise ConnectionError(
            "Could not find any running Ray instance. Please specify the one to connect to "
            "by setting `--address` flag or `RAY_ADDRESS` environment variable."
        )

    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(UsageError) as exc:
        RayCluster.connect("auto")
    text = str(exc.value)
    assert text.startswith("--ray auto: cannot join the Ray cluster: no Ray cluster runs")
    assert "ray start --head" in text
    assert "`--address` flag" not in text
