"""The HTML report of ``ledgerspec check --report``: what it holds, parsed; and what Chromium draws of it.

The run: traces of a ledger spec whose writer confirms an entry on its first ack (seeded bug
``lac_before_qa``), checked against that same spec, so that the step that closes the ledger breaks the
invariant ``NoAckedEntryLost`` (the explorer's counterexample); a trace whose id holds markup; a bad
line; and conforming walks. Then a client-mode run that hits a search bound.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from headless_chromium import dump_dom, screenshot
from ledgerspec.conformance.generate import WalkStep, random_walk, trace_events, write_ndjson
from ledgerspec.spec.ledger.ledger import LedgerSpec, Msg
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.model_checking.explorer.explorer import explore

BUGGY: dict[str, Any] = {"MaxEntries": 1, "Bug": "lac_before_qa"}
CONSTANTS = [f"--const={k}={v}" for k, v in BUGGY.items()]
MARKUP_ID = '<img src="x.png">ce'


# -- a small DOM, from the standard library's parser ---------------------------------------
@attrs.define
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = attrs.Factory(list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> Iterator[Element]:
        yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attributes: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attributes.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attributes: str) -> Element:
        found = self.find_all(tag, cls, **attributes)
        assert found, f"no <{tag or '*'}> class={cls} {attributes}"
        return found[0]


VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"  # well nested
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], [e.tag for e in builder.stack]
    return builder.root


def words(text: str) -> str:
    return " ".join(text.split())


# -- the run -------------------------------------------------------------------------------
def _counterexample(spec: LedgerSpec) -> tuple[WalkStep, ...]:
    (violation,) = explore(spec, check_deadlock=False).violations
    assert violation.name == "NoAckedEntryLost"
    return tuple(WalkStep(t.step.action, tuple(v for _, v in t.step.params), t.state) for t in violation.trace)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("report")
    spec = LedgerSpec(**BUGGY)
    walk = _counterexample(spec)
    rng = random.Random(5)
    traces = [trace_events(spec, walk, "full", "counterexample"), trace_events(spec, walk, "full", MARKUP_ID)]
    traces += [trace_events(spec, random_walk(spec, rng, 4), "full", f"walk-{i}") for i in range(4)]
    write_ndjson(tmp / "traces.ndjson", traces)
    (tmp / "bad.ndjson").write_bytes(
        b"".join(orjson.dumps(e) + b"\n" for e in traces[2][:2]).replace(b'"walk-0"', b'"bad-0"')
        + b'{"v": 1, "trace": "bad-0", oops\n'
    )
    report = tmp / "report.html"
    code = main(["check", str(tmp / "traces.ndjson"), str(tmp / "bad.ndjson"), *CONSTANTS, "--report", str(report)])
    return {"dir": tmp, "code": code, "report": report, "walk": walk, "html": report.read_text("utf-8")}


@pytest.fixture(scope="module")
def doc(run: dict[str, Any]) -> Element:
    return parse(run["html"])


def _violation(doc: Element, trace: str) -> Element:
    return doc.find("article", "violation", data_trace=trace)


def test_the_report_is_written_and_the_exit_status_is_the_checks(run: dict[str, Any]) -> None:
    assert run["code"] == 1  # a violation (bad input also, but 1 wins)
    assert run["html"].startswith("<!DOCTYPE html>")


def test_the_summary_counts_the_run(doc: Element) -> None:
    counts = {k: doc.find(id=f"summary-{k}").text for k in ("traces", "conforms", "violations", "input-errors")}
    # 6 traces in one file and 1 in the other: 2 violate, the bad one is inconclusive, the walks conform
    # (their four steps cannot reach the buggy close, nor a state that breaks an invariant).
    assert counts == {"traces": "7", "conforms": "4", "violations": "2", "input-errors": "1"}
    assert [s.attrs["id"] for s in doc.find_all("section")] == [
        "summary",
        "violations",
        "inconclusive",
        "input-errors",
        "coverage",
    ]


def test_a_violation_names_its_event_invariant_and_place(run: dict[str, Any], doc: Element) -> None:
    article = _violation(doc, "counterexample")
    walk = run["walk"]
    failing = len(walk) - 1  # the last step, the one that breaks the invariant
    heading = words(article.find("h3").text)
    assert heading == f"Trace counterexample breaks the promise NoAckedEntryLost at event {failing}: {walk[-1].action}"
    reason = words(article.find("p", "reason").text)
    assert reason.startswith("Where it leaves the spec: ")
    assert "reaches a state that breaks the invariant NoAckedEntryLost" in reason
    assert article.find("code", "where").text == f"{run['dir'] / 'traces.ndjson'}:{failing + 1}"
    # The promise leads, in words, with the reports that establish it.
    promise = article.find("div", "promise")
    assert words(promise.find("b").text) == LedgerSpec.NoAckedEntryLost.__doc__.strip()
    evidence = [words(li.text) for li in promise.find("ul", "evidence").find_all("li")]
    assert any(e.startswith("writer_lac = 0, reported by ") for e in evidence), evidence
    assert any(e.startswith("meta_last_entry = -1, reported by") for e in evidence), evidence


def test_the_findings_list_every_violation_with_its_promise(doc: Element) -> None:
    rows = doc.find("table", "findings").find_all("tr", "finding")
    assert [r.attrs["data-trace"] for r in rows] == ["counterexample", MARKUP_ID]
    for row in rows:
        cells = [words(td.text) for td in row.find_all("td")]
        assert cells[1:3] == ["bug", "NoAckedEntryLost"] and cells[-1] == "surprise", cells
        assert "surprise" in row.attrs["class"]


def test_the_sequence_diagram_has_lanes_messages_and_the_failing_event(run: dict[str, Any], doc: Element) -> None:
    article = _violation(doc, "counterexample")
    svg = article.find("svg", "sequence")
    lanes = [g.attrs["data-process"] for g in svg.find_all("g", "lane")]
    assert lanes[0] == "writer" and lanes == sorted(lanes, key=TRACE.lane_order)
    assert {"bookie-1", "bookie-2"} <= set(lanes)
    events = svg.find_all("g", "event")
    assert [int(g.attrs["data-event-index"]) for g in events] == list(range(len(run["walk"])))
    (failing,) = svg.find_all("g", "failing")
    assert failing.attrs["id"] == "v1-failing"
    assert failing.find("text", "event-label").text == f"{len(run['walk']) - 1} {run['walk'][-1].action}"
    assert f"traces.ndjson:{len(run['walk'])}" in failing.find("title").text  # the whole event, on hover
    # A bookie's step draws the request it serves, from the writer's lane to the bookie's.
    adds = [g for g in events if "BookieReceivesAdd" in g.find("text", "event-label").text]
    assert adds and all(g.find_all("line", "message") for g in adds)
    assert any(t.text.startswith("AddReq e0") for g in adds for t in g.find_all("text", "message-label"))


def test_the_state_the_frontier_and_the_path_are_shown(run: dict[str, Any], doc: Element) -> None:
    article = _violation(doc, "counterexample")
    state = {row.find_all("td")[0].text: row for row in article.find("table", "state").find_all("tr")[1:]}
    assert set(state) == {f.name for f in attrs.fields(type(run["walk"][-1].state))}
    assert words(state["writer_lac"].find_all("td")[1].text) == "0"  # the buggy LAC, confirmed on one ack
    (candidate,) = article.find_all("div", "candidate")
    rows = candidate.find_all("tr", "successor")
    assert len(rows) == 1
    rejection = words(rows[0].find("td", "rejection").text)
    assert "breaks the invariant NoAckedEntryLost" in rejection
    # The step that would have been taken closes the ledger: its changes are shown, old and new.
    changes = words(rows[0].text)
    assert "meta_status" in changes and '"CLOSED"' in changes
    path = [words(li.text) for li in article.find("ol", "path").find_all("li")]
    assert path[0] == "Init" and len(path) == len(run["walk"])  # Init, the steps before the failing event, it
    assert path[-1] == f"{run['walk'][-1].action}: no candidate takes it"


def test_trace_ids_are_escaped(doc: Element) -> None:
    article = _violation(doc, MARKUP_ID)
    assert MARKUP_ID in article.find("h3").text
    assert doc.find_all("img") == []


def test_bad_input_and_inconclusive_traces_are_listed(run: dict[str, Any], doc: Element) -> None:
    (error,) = doc.find_all("li", "input-error")
    assert words(error.text).startswith(f"{run['dir'] / 'bad.ndjson'}:3:")
    (row,) = doc.find("section", id="inconclusive").find_all("tr", "inconclusive-trace")
    assert "bad-0" in row.text and "bad input" in row.text


def test_coverage_lists_every_action_and_the_guards_held(doc: Element) -> None:
    table = doc.find("table", id="coverage-actions")
    names = [words(tr.find("code").text) for tr in table.find_all("tr")[1:]]
    assert names == [a.name for a in LedgerSpec.actions]
    never = {words(tr.find("code").text) for tr in table.find_all("tr", "never")}
    assert "WriterAddsEntry" not in never and "WriterChangesEnsemble" in never  # E=3 bookies, none replaced
    properties = words(doc.find("table", id="coverage-properties").text)
    assert "NoAckedEntryLost" in properties and "ledger closed:" in properties
    # The counterexample's ledger was closed by the writer (the state before the failing close is open):
    # the guard about closed ledgers never held on a matched state, and the report says so.
    assert "closed after an ack: never held" in properties


def test_the_report_fetches_nothing_and_runs_no_script(run: dict[str, Any], doc: Element) -> None:
    assert doc.find_all("script") == [] and doc.find_all("link") == [] and doc.find_all("iframe") == []
    for element in doc.iter():
        for name, value in element.attrs.items():
            assert not name.startswith("on"), (element.tag, name)
            if name in ("src", "href"):
                assert value.startswith("#"), (element.tag, name, value)
            if re.match(r"\s*(https?:)?//", value):
                assert name == "xmlns", (element.tag, name, value)  # the SVG namespace names, fetches nothing
    assert "url(http" not in run["html"] and "@import" not in run["html"]


def test_a_bound_hit_is_named(tmp_path: Path) -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    state = next(iter(spec.init_states()))
    steps = [WalkStep("Init", (), state)]
    for name, args in [("WriterAddsEntry", (-1,)), ("NetworkLosesMessage", (Msg("AddReq", 0, 1, 0, -1),))]:
        state = spec.find_action(name).fn(spec, state, *args)
        steps.append(WalkStep(name, args, state))
    state = spec.WriterChangesEnsemble(state, 1, 4)
    steps.append(WalkStep("WriterChangesEnsemble", (1, 4), state))
    write_ndjson(tmp_path / "c.ndjson", [trace_events(spec, tuple(steps), "client", "lossy")])
    report = tmp_path / "r.html"
    argv = ["check", str(tmp_path / "c.ndjson"), "--mode", "client", "--const", "NumBookies=4", "--const", "MaxLoss=1"]
    assert main([*argv, "--max-hidden-steps", "0", "--report", str(report)]) == 4
    (row,) = parse(report.read_text("utf-8")).find_all("tr", "inconclusive-trace")
    assert row.find("code", "bound").text == "max_hidden_steps=0"
    assert "before event 2" in words(row.text) and "2 of 3" in words(row.text)  # Init and the add matched


def test_a_report_that_cannot_be_written_is_refused_before_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_ndjson(tmp_path / "a.ndjson", [[{"v": 1, "trace": "t", "process": "writer", "seq": 1, "type": "Init"}]])
    code = main(["check", str(tmp_path / "a.ndjson"), "--report", str(tmp_path / "no" / "such" / "r.html")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "cannot write the report" in words(err) and "Traceback" not in err


# -- in a real browser ------------------------------------------------------------------
# The page Chromium draws: the first violation's diagram alone, under the report's own style, so that the screenshot
# is small and needs no script to run before it is painted. The script added here writes where Chromium laid out
# the failing event and the lanes, and the colour it gave the failing event's dot, into the page it dumps.
MEASURE = """<script>
const failing = document.querySelector(".event.failing");
const box = (e) => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
const svg = failing.ownerSVGElement;
const layout = {
  failing: box(failing), svg: box(svg),
  lanes: [...svg.querySelectorAll(".lane")].map((g) => [g.dataset.process, box(g)]),
  dot: getComputedStyle(failing.querySelector("circle")).fill,
  label: getComputedStyle(failing.querySelector(".event-label")).fill,
};
document.body.insertAdjacentHTML("beforeend", "<pre id='layout'></pre>");
document.getElementById("layout").textContent = JSON.stringify(layout);
</script>"""
RED = (0xB3, 0x26, 0x1E)  # --red in the report's style
ROW_RED = (0xFD, 0xE7, 0xE5)  # --red-bg: the failing row


def _diagram_page(html: str) -> str:
    """The report's head and the first violation's diagram (``<div class="diagram">``, which holds no div)."""
    body = html.index("<body>") + len("<body>")
    start = html.index('<div class="diagram">', html.index('id="v1"'))
    end = html.index("</div>", start) + len("</div>")
    return f"{html[:body]}\n{html[start:end]}\n</body>\n</html>\n"


@pytest.mark.chromium
def test_chromium_draws_the_violation(run: dict[str, Any], tmp_path: Path) -> None:
    diagram = _diagram_page(run["html"])
    measured = tmp_path / "measured.html"
    measured.write_text(diagram.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = dump_dom(measured, tmp_path / "profile")
    layout = json.loads(parse(dom).find("pre", id="layout").text)
    x, y, width, height = layout["failing"]
    sx, sy, swidth, sheight = layout["svg"]
    assert width > 100 and height >= 10  # its label, dot and arrows were laid out
    assert sx <= x and x + width <= sx + swidth and sy <= y and y + height <= sy + sheight
    lanes = dict(layout["lanes"])
    assert {"writer", "bookie-1", "bookie-2"} <= set(lanes) and all(b[3] > 50 for b in lanes.values())
    assert lanes["writer"][0] < lanes["bookie-1"][0] < lanes["bookie-2"][0]
    assert layout["dot"] == layout["label"] == "rgb(179, 38, 30)"
    # The pixels: the diagram, with the failing row's band and its red dot.
    page = tmp_path / "diagram.html"
    page.write_text(diagram, encoding="utf-8")
    png = tmp_path / "shot.png"
    shot = screenshot(page, tmp_path / "profile", png, width=1000, height=int(sy + sheight) + 10)
    band, dot = shot.count(ROW_RED, 4), shot.count(RED, 10)
    drawn = f"{shot.colors()} colours, {band} pixels of the failing row's band, {dot} red; the screenshot: {png}"
    assert shot.colors() > 20, drawn  # not blank
    assert band > 2000 and dot > 30, drawn


def test_a_trace_that_fails_at_its_first_event_and_a_run_that_conforms(tmp_path: Path) -> None:
    init = {"v": 1, "trace": "t", "process": "writer", "seq": 1, "type": "Init"}
    write_ndjson(tmp_path / "bad-init.ndjson", [[{**init, "observed": {"writer_lac": 5}}]])
    assert main(["check", str(tmp_path / "bad-init.ndjson"), "--report", str(tmp_path / "a.html")]) == 1
    article = _violation(parse((tmp_path / "a.html").read_text("utf-8")), "t")
    assert "the initial state: observed writer_lac = 5, the spec has -1" in words(article.find("p", "reason").text)
    assert article.find("g", "failing").attrs["data-event-index"] == "0"
    (candidate,) = article.find_all("div", "candidate")
    assert "reached by Init" in words(candidate.text) and "What that step changed" not in candidate.text
    write_ndjson(tmp_path / "good.ndjson", [[init]])
    assert main(["check", str(tmp_path / "good.ndjson"), "--report", str(tmp_path / "b.html")]) == 0
    good = parse((tmp_path / "b.html").read_text("utf-8"))
    assert "Every trace conforms to the spec." in words(good.find("section", id="summary").text)
    assert words(good.find("section", id="violations").text) == "Violations none"


def test_violations_recorded_with_a_seeded_bug_are_expected_and_the_others_surprises(tmp_path: Path) -> None:
    """A manifest that names the mutant its traces were recorded with makes their violations expected."""
    from ledgerspec.conformance.manifest import manifest_json, write_manifest

    buggy = LedgerSpec(**BUGGY)
    walk = _counterexample(buggy)
    correct = {"MaxEntries": 1}
    for folder, mutant in (("seeded", "lac_before_qa"), ("plain", None)):
        (tmp_path / folder).mkdir()
        write_ndjson(tmp_path / folder / "t.ndjson", [trace_events(buggy, walk, "full", folder)])
        manifest = manifest_json(spec="ledger", mode="full", constants=correct, files=["t.ndjson"], mutant=mutant)
        write_manifest(tmp_path / folder, manifest)
    report = tmp_path / "report.html"
    assert main(["check", str(tmp_path / "seeded"), str(tmp_path / "plain"), "--report", str(report)]) == 1
    doc = parse(report.read_text("utf-8"))
    rows = {r.attrs["data-trace"]: r for r in doc.find("table", "findings").find_all("tr", "finding")}
    assert "expected" in rows["seeded"].attrs["class"] and "surprise" in rows["plain"].attrs["class"]
    assert words(rows["seeded"].find_all("td")[-1].text) == "expected: seeded bug lac_before_qa"
    assert "1 expected (recorded with a seeded bug), 1 surprise" in words(doc.find("p", "violates").text)
    meta = words(_violation(doc, "plain").find("p", "meta").text)
    assert "a surprise: no seeded bug was recorded" in meta
