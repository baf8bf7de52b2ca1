"""The one JSON policy every reader reads by: numbers no float holds (an integer of 5,000 digits,
which Python refuses to convert, one of 400, which `float()` cannot, a `1e400` that reads as
infinity) and nesting past the recursion limit are one error saying what is wrong; the
constants Python writes for a non-finite float read as what they are."""

from __future__ import annotations

import math
import sys

import pytest

from trainspeed.errors import UsageError
from trainspeed.user_json import JSONRefused, cut_short, loads, parse_json

FIVE_THOUSAND = "1" * 5000
FOUR_HUNDRED = "1" * 400


@pytest.mark.parametrize("text, said", [
    ('{"batch": ' + FIVE_THOUSAND + "}", "the number 11111111111111111111... (5000 digits) is larger than any"),
    ('{"batch": ' + FOUR_HUNDRED + "}", "the number 11111111111111111111... (400 digits) is larger than any"),
    ("[-" + "9" * 309 + "]", "the number -9999999999999999999... (309 digits) is larger than any number a float"),
    ('{"seconds": 1e400}', "the number 1e400 is larger than any number a float holds"),
    ('{"seconds": -' + FOUR_HUNDRED + ".5}", "the number -1111111111111111111... (402 characters) is larger"),
], ids=["5000-digits", "400-digits", "past-the-largest-float", "1e400", "a-float-of-400-digits"])
def test_a_number_no_float_holds_is_refused_saying_so(text: str, said: str) -> None:
    with pytest.raises(JSONRefused) as refused:
        loads(text)
    assert str(refused.value).startswith(said) and refused.value.kind == JSONRefused.NUMBER
    assert "(the file was edited or written by another program)" in str(refused.value)


def test_every_number_a_float_holds_reads_and_the_non_finite_constants_read_as_written() -> None:
    largest = int(sys.float_info.max)
    read = loads(f'[{largest}, -{largest}, 1e-400, 2.5, 7, NaN, Infinity, -Infinity]')
    assert read[:5] == [largest, -largest, 0.0, 2.5, 7] and isinstance(read[4], int)
    assert math.isnan(read[5]) and read[6] == math.inf and read[7] == -math.inf


def test_text_that_is_not_json_or_nests_too_deeply_is_refused_saying_which() -> None:
    with pytest.raises(JSONRefused) as not_json:
        loads("rows of a spreadsheet")
    assert not_json.value.syntax and str(not_json.value) == "not valid JSON (Expecting value: line 1 column 1)"
    with pytest.raises(JSONRefused) as deep:
        loads("[" * 100_000 + "]" * 100_000)
    assert deep.value.kind == JSONRefused.NESTING and not deep.value.syntax


def test_parse_json_names_where_the_text_came_from_in_one_line() -> None:
    with pytest.raises(UsageError) as refused:
        parse_json('{"steps": ' + FIVE_THOUSAND + "}", "log.jsonl: line 3")
    assert str(refused.value).startswith("log.jsonl: line 3: the number 11111111111111111111... (5000 digits) is larger")
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300


def test_text_cut_short_says_how_long_it_was() -> None:
    assert cut_short("64@0") == "64@0"
    assert cut_short(FIVE_THOUSAND) == "11111111111111111111... (5000 digits)"
    assert cut_short("64@0," + FIVE_THOUSAND, 10) == "64@0,11111... (5005 characters)"


@pytest.mark.parametrize("literal", ["9" * 210 + "e99", "2" + "0" * 150 + "e158", "1E+0400", "0.2e309"],
                         ids=["210-digits-and-e99", "151-digits-and-e158", "exponent-400", "fraction-e309"])
def test_a_float_literal_that_overflows_however_written_is_refused(literal: str) -> None:
    """Its digits before the point and its exponent add up to 309 or more."""
    with pytest.raises(JSONRefused, match="is larger than any number a float holds"):
        loads(f'{{"x": [1, {literal}]}}')
    assert loads(f'{{"x": "{literal}"}}') == {"x": literal} and loads(b'[1e99, 1e-400]') == [1e99, 0.0]
