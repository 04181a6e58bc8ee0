"""Tests of ledgerspec.tools.model_checking.tlc.tla_parse: TLA+ values and states as TLC prints them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from ledgerspec.spec.values import FnValue, normalize
from ledgerspec.tools.model_checking.tlc.tla_parse import TlaParseError, iter_dump, parse_dump, parse_state, parse_value

# -- single values -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-17", -17),
        ("TRUE", True),
        ("FALSE", False),
        ('"hello"', "hello"),
        ('""', ""),
        ("b1", "b1"),  # a model value
        ("_x", "_x"),
        ("1st", "1st"),  # a TLA+ name may start with a digit
        ("{}", frozenset()),
        ("{1, 2, 3}", frozenset({1, 2, 3})),
        ("<<>>", ()),
        ("<< >>", ()),  # how TLC prints the empty function
        ('<<1, "a", TRUE>>', (1, "a", True)),
        ("1..4", frozenset({1, 2, 3, 4})),
        ("-2..0", frozenset({-2, -1, 0})),
        ("3..2", frozenset()),
    ],
)
def test_scalar_and_simple_values(text: str, expected: object) -> None:
    value = parse_value(text)
    assert value == expected
    assert type(value) is type(expected)


def test_booleans_are_not_ints() -> None:
    assert parse_value("TRUE") is True
    assert parse_value("1") is not True
    assert parse_value("<<TRUE, 1>>") == (True, 1)
    assert type(parse_value("<<TRUE, 1>>")[1]) is int


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"l1\nl2"', "l1\nl2"),
        (r'"t\tab"', "t\tab"),
        (r'"cr\r"', "cr\r"),
        (r'"ff\f"', "ff\f"),
        (r'"\\\""', '\\"'),
        ('"a, b }"', "a, b }"),  # punctuation inside a string is not a token
        ('"x |-> y"', "x |-> y"),
    ],
)
def test_string_escapes(text: str, expected: str) -> None:
    assert parse_value(text) == expected


def test_records_are_fn_values() -> None:
    value = parse_value('[a |-> 1, b |-> "x"]')
    assert isinstance(value, FnValue)
    assert dict(value) == {"a": 1, "b": "x"}
    # The field order TLC prints does not matter.
    assert parse_value('[b |-> "x", a |-> 1]') == value
    assert value == normalize({"a": 1, "b": "x"})


def test_functions() -> None:
    value = parse_value("(1 :> 2 @@ 3 :> 4)")
    assert isinstance(value, FnValue)
    assert dict(value) == {1: 2, 3: 4}
    # A function with domain 1..n is a sequence, in whatever order it is printed.
    assert parse_value("(2 :> 20 @@ 1 :> 10)") == (10, 20)
    # Functions with string domains and records are the same values.
    assert parse_value('("a" :> 1 @@ "b" :> 2)') == parse_value("[a |-> 1, b |-> 2]")
    # Model values and tuples as arguments.
    assert dict(parse_value("(A :> A @@ B :> B)")) == {"A": "A", "B": "B"}
    assert dict(parse_value("(<<1, 2>> :> 3 @@ <<2, 1>> :> 4)")) == {(1, 2): 3, (2, 1): 4}
    assert dict(parse_value('("p q" :> 1)')) == {"p q": 1}
    # Booleans are no integers here either: this domain is not 1..2.
    assert isinstance(parse_value("(TRUE :> 1 @@ FALSE :> 2)"), FnValue)


def test_nesting() -> None:
    text = (
        '[a |-> {<<1, -2>>, <<3, "x">>}, b |-> [q |-> [z |-> A], p |-> (1 :> {})], c |-> <<[y |-> TRUE], {}, << >>>>]'
    )
    expected = normalize(
        {
            "a": {(1, -2), (3, "x")},
            "b": {"q": {"z": "A"}, "p": FnValue.of({1: frozenset()})},
            "c": ({"y": True}, frozenset(), ()),
        }
    )
    assert parse_value(text) == expected


def test_deep_nesting() -> None:
    depth = 200
    value = parse_value("<<" * depth + "1" + ">>" * depth)
    for _ in range(depth):
        assert isinstance(value, tuple)
        assert len(value) == 1
        value = value[0]
    assert value == 1


def test_values_spanning_lines() -> None:
    # As TLC pretty-prints long values.
    text = "[ a |-> 1,\n  b |->\n      << 1,\n         2,\n         3 >> ]"
    assert parse_value(text) == normalize({"a": 1, "b": (1, 2, 3)})


def test_sets_of_structured_values_are_hashable_and_deduplicated() -> None:
    value = parse_value("{[a |-> 1], [a |-> 1], (1 :> 2), <<1>>}")
    assert len(value) == 3


# -- errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("", "expected a value, found end of input", 1, 1),
        ("{1, 2", "expected ',' or '}', found end of input", 1, 6),
        ("<<1 2>>", "expected ',' or '>>', found '2'", 1, 5),
        ("[a |-> 1, b]", "expected '|->', found ']'", 1, 12),
        ("[1 |-> 2]", "expected a record field name, found '1'", 1, 2),
        ("[a |-> 1, a |-> 2]", "record field 'a' given twice", 1, 11),
        ("(1 :> 2 @@ 1 :> 3)", "function argument given twice", 1, 12),
        ("(1 :> 2", "expected '@@' or ')', found end of input", 1, 8),
        ('"abc', "unterminated string", 1, 1),
        ('"a\\qb"', "unknown escape '\\q' in string", 1, 3),
        ("1..x", "expected an integer after '..'", 1, 4),
        ("x y", "expected end of value, found 'y'", 1, 3),
        ("{1, #}", "expected a value, found '#'", 1, 5),
        ("<<1,\n  2,\n  3 4>>", "expected ',' or '>>', found '4'", 3, 5),
    ],
)
def test_errors_say_what_and_where(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(TlaParseError) as info:
        parse_value(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.what.startswith(message)
    assert (error.line, error.column) == (line, column)
    assert f"line {line}, column {column}" in str(error)
    # The snippet shows the offending line with a caret under the column.
    shown, caret = str(error).splitlines()[-2:]
    assert caret.index("^") - 2 == column - 1
    assert shown[2:] == (text.splitlines() or [""])[line - 1]


def test_error_snippet_of_a_long_line_is_cut_around_the_column() -> None:
    text = "<<" + ", ".join(str(i) for i in range(500)) + " x>>"
    with pytest.raises(TlaParseError) as info:
        parse_value(text)
    snippet, caret = str(info.value).splitlines()[-2:]
    assert len(snippet) < 130
    assert snippet[caret.index("^")] == "x"


# -- states --------------------------------------------------------------------


def test_state_with_several_variables() -> None:
    text = '/\\ r = [a |-> 1, b |-> "s\\"q"]\n/\\ x = 0\n/\\ y = <<0, 1>>\n'
    assert parse_state(text) == {"r": normalize({"a": 1, "b": 's"q'}), "x": 0, "y": (0, 1)}


def test_state_with_one_variable() -> None:
    assert parse_state("x = 5\n") == {"x": 5}
    assert parse_state("x = {1,\n  2}\n\n") == {"x": frozenset({1, 2})}


def test_state_values_spanning_lines() -> None:
    text = textwrap.dedent(
        """\
        /\\ t = [ a |-> {<<1, -2>>, <<3, "x">>},
          bb |-> [q |-> [z |-> A], p |-> [z |-> A]],
          c |-> <<[y |-> TRUE, w |-> FALSE], {}, <<>>, << >>>> ]
        /\\ u = "/\\\\ not a conjunct"
        /\\ v = 1..3
        """
    )
    state = parse_state(text)
    assert set(state) == {"t", "u", "v"}
    assert state["t"]["bb"]["q"] == normalize({"z": "A"})
    assert state["u"] == "/\\ not a conjunct"
    assert state["v"] == frozenset({1, 2, 3})


def test_empty_state() -> None:
    assert parse_state("") == {}
    assert parse_state("\n\n") == {}


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("/\\ x = 1\n/\\ x = 2\n", "variable 'x' given twice", 2),
        ("/\\ x = 1\n/\\ y 2\n", "expected 'variable = value'", 2),
        ("/\\ x = 1\n/\\ y = \n", "expected a value for variable 'y'", 2),
        ("/\\ x = {1, 2\n/\\ y = 3\n", "expected ',' or '}'", 2),
        ("junk\n/\\ x = 1\n", "expected '/\\ ' at the start of a state line", 1),
        ("x = 1 2\n", "expected end of value, found '2'", 1),
    ],
)
def test_state_errors(text: str, message: str, line: int) -> None:
    with pytest.raises(TlaParseError) as info:
        parse_state(text)
    assert info.value.what.startswith(message)
    assert info.value.line == line


# -- dump files ----------------------------------------------------------------

_DUMP = """\
State 1:
/\\ x = 0
/\\ y = <<>>

State 2:
/\\ x = 1
/\\ y = <<[a |-> 1,
        b |-> {}]>>

State 3:
/\\ x = 0
/\\ y = <<>>

"""


def test_parse_dump(tmp_path: Path) -> None:
    path = tmp_path / "states.dump"
    path.write_text(_DUMP)
    states = parse_dump(path)
    assert states == [
        {"x": 0, "y": ()},
        {"x": 1, "y": (normalize({"a": 1, "b": frozenset()}),)},
        {"x": 0, "y": ()},
    ]
    # iter_dump yields the same states one by one; the name without .dump works too.
    assert list(iter_dump(tmp_path / "states")) == states


def test_dump_of_single_variable_states(tmp_path: Path) -> None:
    path = tmp_path / "one.dump"
    path.write_text("State 1:\nx = [a |-> 1]\n\nState 2:\nx = [a |-> 2]\n\n")
    assert parse_dump(path) == [{"x": normalize({"a": 1})}, {"x": normalize({"a": 2})}]


def test_empty_dump(tmp_path: Path) -> None:
    path = tmp_path / "empty.dump"
    path.write_text("")
    assert parse_dump(path) == []


def test_dump_errors_point_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.dump"
    path.write_text(_DUMP.replace("b |-> {}]>>", "b |-> {]>>"))
    with pytest.raises(TlaParseError) as info:
        parse_dump(path)
    assert info.value.source == str(path)
    assert info.value.line == 8  # the file line of "b |-> {]>>"
    assert f"{path}:line 8" in str(info.value)


def test_dump_numbering_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "skip.dump"
    path.write_text("State 1:\nx = 0\n\nState 3:\nx = 1\n\n")
    with pytest.raises(TlaParseError, match="expected state number 2, found 3") as info:
        parse_dump(path)
    assert info.value.line == 4


def test_dump_must_start_with_a_state_header(tmp_path: Path) -> None:
    path = tmp_path / "headless.dump"
    path.write_text("x = 0\n\nState 1:\nx = 1\n")
    with pytest.raises(TlaParseError, match="expected 'State 1:'"):
        parse_dump(path)


def test_repeated_lines_in_a_dump_give_equal_values(tmp_path: Path) -> None:
    # iter_dump reuses the value of a line it has seen; the states stay independent dicts.
    path = tmp_path / "rep.dump"
    path.write_text("".join(f"State {i}:\n/\\ s = {{1, 2}}\n/\\ n = {i}\n\n" for i in range(1, 6)))
    states = parse_dump(path)
    assert [s["n"] for s in states] == [1, 2, 3, 4, 5]
    assert all(s["s"] == frozenset({1, 2}) for s in states)
    states[0]["s"] = "changed"
    assert states[1]["s"] == frozenset({1, 2})
