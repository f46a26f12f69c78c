"""`tools/battery`, the battery of bad and edge inputs: its classification rule, and one run."""

import types

import pytest


def case(expect="refuse", mentions=(), check=None):
    return types.SimpleNamespace(expect=expect, mentions=tuple(mentions), check=check)


@pytest.mark.parametrize("error,mentions,expected", [
    (ValueError("grid=(-1,): every size must be positive (got -1)."), ("grid", "-1"), "clear"),
    (ValueError("grid=(-1,) is wrong."), ("grid", "-1"), "unclear"),  # no advice
    (ValueError("every size must be positive (got -1)."), ("grid", "-1"), "unclear"),  # no name
    (ValueError("grid=(-10,) must be positive."), ("grid", "-1"), "unclear"),  # -1 not a token
    (KeyError("BLOCKSIZE"), ("grid", "BLOCKSIZE"), "unclear"),
    (RuntimeError("PassManager::run failed; use num_ctas=1"), ("num_ctas",), "unclear"),
    (TypeError("constexprs names 'BLOCKK'; its parameters are (BLOCK)"), ("BLOCKK",), "clear"),
    (ValueError("debug='no' must be a bool"), ("debug", "'yes'|'no'"), "clear"),
], ids=["clear", "no advice", "no argument", "another value", "bare KeyError", "internal",
        "lists what is allowed", "an alternative"])
def test_a_refusal_is_clear_only_with_the_mentions_and_advice(battery, error, mentions,
                                                              expected):
    assert battery.classify(case(mentions=mentions), error, None)[0] == expected


def test_acceptances_are_judged_by_what_was_expected(battery):
    assert battery.classify(case("refuse"), None, [])[0] == "silent"
    assert battery.classify(case("accept"), None, [])[0] == "correct"
    assert battery.classify(case("accept", check=lambda r: r == 1), None, 2)[0] == "silent"
    assert battery.classify(case("either", check=lambda r: r == 1), None, 1)[0] == "correct"
    assert battery.classify(case("accept"), ValueError("no"), None)[0] == "refused-good"


def test_jaxs_traceback_note_is_no_advice(battery):
    error = ValueError("grid=(-1,) is wrong.")
    error.add_note("For simplicity, JAX has removed its internal frames. Set "
                   "JAX_TRACEBACK_FILTERING=off to include these.")
    assert battery.classify(case(mentions=("grid", "-1")), error, None)[0] == "unclear"
