"""JSON codecs of spec values: one canonical encoding, strict decoding with the path of a bad part."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from ledgerspec.spec.codecs import BOOL, INT, CodecError, codec_for
from ledgerspec.spec.ledger.ledger import LedgerSpec, Msg, Recoverer
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.tools.model_checking.explorer.explorer import explore

IDLE = codec_for(Recoverer).encode(Recoverer("IDLE", 0, frozenset(), -1, -1, -1, frozenset(), -1, frozenset()))


def test_every_variable_of_every_state_round_trips() -> None:
    spec = LedgerSpec(MaxEntries=1, MaxLoss=1)
    result = explore(spec, check_deadlock=False, keep_states=True)
    assert result.states is not None
    rng = random.Random(0)
    for state in result.states[::7]:
        for name in TRACE.variables:
            codec, value = TRACE.codecs[name], getattr(state, name)
            data = codec.encode(value)
            assert codec.decode(orjson.loads(orjson.dumps(data)), name) == value
            assert codec.matches(data, value)
            if isinstance(data, list) and len(data) > 1 and name in ("net", "writer_acks", "crashed"):
                shuffled = list(data)
                rng.shuffle(shuffled)  # a set may come in any order
                assert codec.decode(shuffled, name) == value and codec.matches(shuffled, value)


def test_sets_encode_in_ascending_order() -> None:
    codec = codec_for(frozenset[tuple[int, int]])
    assert codec.encode(frozenset({(10, 1), (2, 3), (2, 1)})) == [[2, 1], [2, 3], [10, 1]]
    assert codec_for(frozenset[int]).encode(frozenset({10, 9, 100})) == [9, 10, 100]


@pytest.mark.parametrize(
    ("hint", "data", "message"),
    [
        (int, True, "x: expected an integer, got a boolean true"),
        (int, 1.0, "x: expected an integer, got a number with a fraction or exponent 1.0"),
        (int, 2**64, "x: integer 18446744073709551616 is out of range (64-bit signed integers only)"),
        (bool, 1, "x: expected true or false, got an integer 1"),
        (tuple[int, int], [1], "x: expected an array of 2 items, got 1"),
        (tuple[int, ...], [1, "2"], 'x[1]: expected an integer, got a string "2"'),
        (frozenset[int], {"a": 1}, "x: expected an array (set of integer), got an object"),
        (Msg, {"type": "AddReq"}, "x: Msg record lacks field client, bookie, entry, lac, recovery, fence"),
        (Msg, {"kind": "AddReq"}, "x: Msg record has no field 'kind'; fields: type, client, bookie"),
        (tuple[Recoverer, ...], [{**IDLE, "phase": 3}], "x[0].phase: expected a string, got an integer 3"),
        (tuple[Recoverer, ...], [{"phase": "IDLE"}], "x[0]: Recoverer record lacks field version, fence_replies"),
    ],
)
def test_bad_data_is_refused_with_its_path(hint: Any, data: Any, message: str) -> None:
    with pytest.raises(CodecError) as info:
        codec_for(hint).decode(data, "x")
    assert message in str(info.value)


def test_partial_records_match_the_values_they_describe() -> None:
    codec = codec_for(Msg)
    m = Msg("AddReq", 0, 2, 1, 0)
    assert codec.check({"type": "AddReq", "bookie": 2}, "m", partial=True) is False  # valid, not complete
    assert codec.matches({"type": "AddReq", "bookie": 2}, m)
    assert not codec.matches({"type": "AddReq", "bookie": 3}, m)
    with pytest.raises(CodecError, match="lacks field"):
        codec.check({"type": "AddReq"}, "m", partial=False)
    # Partial records in a set: each must describe a different element.
    many = codec_for(frozenset[Msg])
    both = frozenset({Msg("AddReq", 0, 1, 0, -1), Msg("AddReq", 0, 2, 0, -1)})
    assert many.matches([{"bookie": 2}, {"type": "AddReq"}], both)
    assert not many.matches([{"bookie": 2}, {"bookie": 2}], both)


def test_scalars_are_strict() -> None:
    assert INT.matches(1, 1) and not INT.matches(True, 1) and not INT.matches(1.0, 1)
    assert BOOL.matches(True, True) and not BOOL.matches(1, True)


def test_types_without_a_codec_are_named() -> None:
    with pytest.raises(TypeError, match="no JSON codec for type"):
        codec_for(float)
    with pytest.raises(TypeError, match="union type"):
        codec_for(int | str)


def _random_value(hint: Any, rng: random.Random) -> Any:
    if hint is int:
        return rng.randint(-3, 12)
    if hint is Msg:
        return Msg(rng.choice(["AddReq", "FenceReq", "ReadReq"]), rng.randint(0, 2), rng.randint(1, 11),
                   rng.randint(-1, 10), rng.randint(-1, 10), rng.random() < 0.5, rng.random() < 0.5)  # fmt: skip
    return tuple(_random_value(a, rng) for a in hint.__args__)


@pytest.mark.parametrize("element", [int, tuple[int, int], Msg], ids=["int", "pair", "Msg"])
def test_the_quick_order_of_sets_is_their_canonical_order(element: Any) -> None:
    """Sets of scalars, tuples and flat records are sorted as Python values, not as JSON: same order."""
    codec = codec_for(frozenset[element])
    rng = random.Random(2)
    for _ in range(300):
        data = codec.encode(frozenset(_random_value(element, rng) for _ in range(rng.randint(0, 12))))
        assert data == sorted(data, key=codec.element.sort_key)  # type: ignore[attr-defined]
