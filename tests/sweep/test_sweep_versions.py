"""Engine versions as a resume compares them (``crossover.sweep.versions``): one build
read by two probes is one version; a version that says it is not known is none."""

from __future__ import annotations

import pytest

from crossover.sweep.versions import known_version, marks, same_version


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("0.26.0", "0.26.0"),
        ("b4567-abc1234", "4567 (abc1234)"),  # llama.cpp's /props and --version
        ("0.26.0", "0.26.0 (abc1234)"),  # one holds the other's marks
        ("0.26.0 + 0.26.1", "0.26.1 + 0.26.0"),  # replicas' versions, in any order
        ("llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cuda-sm90)",
         "llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cuda-sm90)"),
    ],
)  # fmt: skip
def test_one_build_read_two_ways_is_one_version(a: str, b: str) -> None:
    assert same_version(a, b) and same_version(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("0.26.0", "0.26.1"),
        ("0.5.17", "0.5.18"),
        ("b4567-abc1234", "b4568-abd9876"),
        ("1.0 (calibration engine)", "2.0 (calibration engine)"),
        ("llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cuda-sm90)",
         "llama.cpp of llama-cpp-python-0.3.37 (built by crossover: cuda-sm90)"),
        ("dev", "nightly"),  # no marks: as written
        # a release candidate, a nightly, a post release: each another build
        ("0.5.0rc1", "0.5.0rc2"),
        ("0.6.4rc1", "0.6.4"),
        ("0.6.4", "0.6.4.dev15+g5678def"),
        ("0.6.4.dev12+gabcdef1", "0.6.4.dev15+gfedcba2"),
        ("0.5.3.post1", "0.5.3"),
        # another build of one source: crossover's build label
        ("llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cuda-sm90)",
         "llama.cpp of llama-cpp-python-0.3.36 (built by crossover: cpu)"),
        # replicas half upgraded
        ("0.26.0", "0.26.0 + 0.26.1"),
        ("0.26.0 + 0.26.1", "0.26.1"),
    ],
)  # fmt: skip
def test_another_build_is_another_version(a: str, b: str) -> None:
    assert not same_version(a, b) and not same_version(b, a)


def test_marks_are_hashes_releases_and_build_numbers() -> None:
    assert marks("b4567-abc1234") == {"4567", "abc1234"}
    assert marks("version: 0.5.17 (cafe, be)") == {"0.5.17"}  # short hex words are words
    assert marks("calibration engine") == frozenset()


def test_a_version_that_says_it_is_not_known_is_none() -> None:
    assert known_version("b0-unknown") is None
    assert known_version("0 (unknown)") is None  # llama.cpp's --version without git
    assert known_version("0.5.0-dev (build 0, commit unknown)") is None
    assert known_version("") is None and known_version(None) is None
    assert known_version("0.26.0") == "0.26.0"
    assert known_version("0.7.0+unknown") == "0.7.0+unknown"  # a release, a local tag
