"""The recipe checker's shortcut for plain requirement strings and version ranges
(rocmbuild.core.pep508) against the real ``packaging``: whatever the shortcut accepts,
packaging accepts too, so skipping packaging changes no answer and no message."""

from __future__ import annotations

import itertools
import random

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from rocmbuild.core.pep508 import simple_requirement, simple_specifiers
from rocmbuild.recipe.load import requirement_problem

ACCEPTED_REQS = ["ninja", "torch", "setuptools>=70.1,<80", "wheel>=0.44,<0.49", "packaging>=24",
                 "psutil>=5.9", "a", "A.b_c-9", "x~=1.0", "x==2.0.1", "x!=3", "x>1,<2,!=1.5"]
FALLBACK_REQS = ["", " ninja", "ninja ", "torch >= 2", "x[extra]", "x; python_version>'3'",
                 "x @ https://h/x.whl", "-r req.txt", "x>=1.0a1", "x==1.*", "x~=1", "x>=v1",
                 "x>=1,", "x>=1.", "-x", "x-", "x===1", "x>=1+local", "x>= 1"]
ACCEPTED_SPECS = [">=6.2,<7.1", ">=2.2,<2.14", "==6.2", "~=6.2", "!=7.0,>6", "<=1"]
FALLBACK_SPECS = ["", ">=6.2, <7.1", "~=6", "==6.*", ">=6.2rc1", ">=", "6.2", ">=6.2,",
                  ">=1+x", " >=6"]


@pytest.mark.parametrize("text", ACCEPTED_REQS)
def test_plain_requirements_skip_packaging(text: str) -> None:
    assert simple_requirement(text)
    assert Requirement(text).url is None
    assert requirement_problem(text) is None


@pytest.mark.parametrize("text", FALLBACK_REQS)
def test_other_requirements_go_to_packaging(text: str) -> None:
    assert not simple_requirement(text)


@pytest.mark.parametrize("spec", ACCEPTED_SPECS)
def test_plain_ranges_skip_packaging(spec: str) -> None:
    assert simple_specifiers(spec)
    SpecifierSet(spec)


@pytest.mark.parametrize("spec", FALLBACK_SPECS)
def test_other_ranges_go_to_packaging(spec: str) -> None:
    assert not simple_specifiers(spec)


def test_accepted_is_a_subset_of_what_packaging_accepts() -> None:
    """Random strings over the characters that matter: never accepted here but refused by
    packaging (seeded: the same strings every run)."""
    rng = random.Random(13)
    alphabet = "ab1.0,<>=!~-_ *[];@"
    seen = 0
    for n in itertools.chain.from_iterable(itertools.repeat(range(1, 12), 4000)):
        text = "".join(rng.choice(alphabet) for _ in range(n))
        if simple_specifiers(text):
            seen += 1
            SpecifierSet(text)
        if simple_requirement(text):
            seen += 1
            try:
                assert Requirement(text).url is None
            except InvalidRequirement as exc:  # pragma: no cover - the failure being tested
                raise AssertionError(f"{text!r} accepted here, refused by packaging") from exc
    assert seen > 1000
    with pytest.raises(InvalidSpecifier):
        SpecifierSet("~=6")  # the one rule the pattern spells out


def test_plain_ranges_contain_what_packaging_says() -> None:
    """``plan.requirements.preflight``'s version check without packaging: every plain version
    against every plain range of a seeded random sample answers as packaging does."""
    from packaging.version import Version

    from rocmbuild.core.pep508 import simple_contains

    rng = random.Random(13)

    def release() -> str:
        return ".".join(str(rng.choice([0, 0, 1, 2, 6, 7, 10])) for _ in range(rng.randint(1, 4)))

    checked = 0
    for _ in range(6000):
        version = release() + rng.choice(["", "", "+rocm6.2", "+cu121"])
        spec = ",".join(rng.choice(["==", "!=", "<=", ">=", "<", ">", "~="]) + release()
                        for _ in range(rng.randint(1, 2)))
        got = simple_contains(version, spec)
        if got is None:
            continue
        checked += 1
        want = SpecifierSet(spec).contains(Version(version).public, prereleases=True)
        assert got == want, (version, spec)
    assert checked > 3000
    assert simple_contains("2.5.1+rocm6.2", ">=2.2,<2.14") is True
    assert simple_contains("6.2.4", ">=6.0,<7.1") is True
    assert simple_contains("7.1.0", ">=6.0,<7.1") is False
    assert simple_contains("2.5.0a0", ">=2.2") is None  # a pre-release: packaging decides
    assert simple_contains("06.2", ">=6") is None
    assert simple_contains("2.5+", ">=2") is None  # not a version: packaging says so
