"""``crossover.measure.served_model``: before a run every replica is probed and asked for
its models; the model sent is the one given, else the one the first replica lists (said
once), and a replica that is no LLM server of the run's dialect stops it first."""

from __future__ import annotations

import pytest

from crossover.dialects import discovery
from crossover.errors import UsageError
from crossover.measure import probes, served_model
from crossover.spec.run import RunConfig

URLS = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]


def _config() -> RunConfig:
    return RunConfig(url=URLS[0], urls=URLS, model="", concurrency=1, output_tokens=4)  # type: ignore[call-arg]


def _servers(monkeypatch: pytest.MonkeyPatch, lists: dict[str, list[str]]) -> list[str]:
    asked: list[str] = []
    monkeypatch.setattr(probes, "probe", lambda url, headers: asked.append(f"probe {url}"))

    def models(url: str, dialect: object, model: str | None, headers: object) -> list[str]:
        asked.append(f"models {url}")
        if url not in lists:
            raise UsageError(f"{url}: not an LLM server")
        return lists[url]

    monkeypatch.setattr(discovery, "served_models", models)
    return asked


def test_the_one_model_the_first_replica_lists_is_sent_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _servers(monkeypatch, {URLS[0]: ["calib"], URLS[1]: ["calib", "other"]})
    said: list[str] = []
    config = served_model(_config(), None, said.append)
    assert config.model == "calib"
    assert said == [f"model: calib (the one model {URLS[0]} lists)"]
    assert asked == [f"{what} {u}" for u in URLS for what in ("probe", "models")]


def test_a_model_given_is_sent_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    _servers(monkeypatch, {URLS[0]: ["a", "b"], URLS[1]: []})
    said: list[str] = []
    assert served_model(_config(), "alias", said.append).model == "alias"
    assert said == []


def test_a_replica_that_is_no_llm_server_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _servers(monkeypatch, {URLS[0]: ["calib"]})
    with pytest.raises(UsageError, match=f"{URLS[1]}: not an LLM server"):
        served_model(_config(), None, lambda line: None)
