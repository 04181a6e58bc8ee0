"""``ledgerspec mutants``: the oracle kills every engine mutant in full observation over the default seeded fault
workloads, and the unmutated engine has no false positive in either mode over its baseline: here a fifth of the ci
soak's runs, on the same seeds (the whole ci soak and the slow one are ``ledgerspec soak``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
from typing import Any

import attrs
import pytest
from ledgerspec.reference.autorecovery import MUTANTS as AUTORECOVERY_MUTANTS
from ledgerspec.reference.bookie import MUTANTS as BOOKIE_MUTANTS
from ledgerspec.reference.ledger import MUTANTS as CLIENT_MUTANTS
from ledgerspec.reference.managed_ledger import MUTANTS as MANAGED_LEDGER_MUTANTS
from ledgerspec.reference.managed_ledger import TOPIC_ONLY_MUTANTS
from ledgerspec.reference.managed_ledger.topic_simulation import MUTANTS as TOPIC_MUTANTS
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.harness.mutants import MUTANTS
from ledgerspec.tools.harness.soak import PROFILES, SOAK_WORKLOADS, soak_workloads
from ledgerspec.tools.harness.workloads import LEDGER_WORKLOADS, MODES, WORKLOADS, workload_traces

# The mutants the issue names, by the engine's names for them.
REQUIRED = {
    "lac_before_qa",  # LAC advanced before Qa acks
    "complete_out_of_order",  # an add completed out of order
    "fence_qa_total",  # fencing complete after Qa replies in total
    "recovery_read_no_fence",  # recovery reads without fencing (apache/bookkeeper#2614)
    "ensemble_change_local",  # an ensemble change kept only locally (apache/bookkeeper#1591)
    "ack_before_fsync",  # acknowledging before the journal fsync
    "restore_ignores_no_ledger",  # the cursor's restore ignores cursorsLedgerId = -1
    "no_store_fallback",  # mark-delete not stored when the cursor ledger cannot be created (apache/pulsar#20935)
    "restore_skips_unacked",  # the restore jumps past an unacked range
    "trim_deletes_needed_ledger",  # trimming deletes a ledger a cursor still needs
    "metadata_before_copy",  # re-replication names the new bookie before it holds the fragment
    "marks_nothing",  # an auditor that marks nothing when a bookie is lost
}


# The promise each mutant's full-observation traces show broken (the verdicts of the default workloads); empty where
# its traces leave the spec without showing a broken promise, only a difference.
PROMISES: dict[str, set[str]] = {
    "lac_before_qa": {"NoAckedEntryLost", "ExplicitLacIsDurable", "ReadersAgreeUpToLac"},
    "complete_out_of_order": {
        "ExplicitLacIsDurable"
    },  # the LAC jumps an entry without Qa acks: so does the explicit LAC
    "fence_qa_total": {"NoNewAcksToFencedWriter"},
    "recovery_read_no_fence": set(),
    "ensemble_change_local": {"NoAckedEntryLost", "ReadersAgreeUpToLac"},
    "resend_with_current_lac": set(),  # a later LAC on a resend is still a confirmed one
    "resend_reused_buffer": {"ReadersAgreeOnContent"},
    "close_at_last_add_pushed": {"ClosedLedgerIsReadable"},
    "explicit_lac_sends_lap": {"ExplicitLacIsDurable", "ReadersAgreeUpToLac"},
    "recovery_change_ends_at_lac": set(),  # the change itself leaves the spec: it drops the pending write-backs
    "undecided_read_ends_ledger": set(),  # the close before an undecided entry leaves the spec
    "ack_before_fsync": {
        "ExplicitLacIsDurable"
    },  # the entry acked before its fsync is lost; the explicit LAC passes it
    "mark_before_flush": {"MarkNeverPassesUnflushedData"},
    "fence_not_journaled": {"NoNewAcksToFencedWriter"},
    "mark_not_advanced_in_replay": set(),
    "delete_journal_at_mark": {"JournalKeptFromMark"},
    "mark_moves_backwards": {"JournalKeptFromMark", "MarkNeverMovesBackwards"},
    "restore_ignores_no_ledger": set(),
    "no_store_fallback": set(),
    "restore_skips_unacked": {"CursorSkipsNoUnackedMessage", "TrimKeepsUnconsumedEntries"},
    "reset_keeps_acks": {"CursorSkipsNoUnackedMessage", "TrimKeepsUnconsumedEntries"},
    "persists_read_position": {"CursorSkipsNoUnackedMessage", "TrimKeepsUnconsumedEntries"},
    "trim_deletes_needed_ledger": {"TrimKeepsUnconsumedEntries", "CursorSkipsNoUnackedMessage"},
    "skip_unconsumed_ledger": {"TrimPositionBehindCursor", "TrimKeepsUnconsumedEntries"},
    "forget_dedup_on_open": {"DedupPersistsNoDuplicate"},  # the batch sent again after the reopen, written twice
    "unknown_answered_as_duplicate": {"NoAcknowledgedMessageLost"},  # acknowledged before it is written
    "reopen_confirms_new_ledger": {"LastConfirmedIsLastEntry"},  # the reopen hides the entries written before
    "blind_ledger_list_write": {"WritesGoToLastLedger"},  # the old broker's list wins over the new owner's
    "closing_ledger_takes_adds": {"LedgerHoldsItsLimit"},  # the closing ledger takes one more than its limit
    "failed_creation_acks_queued": {"NoAcknowledgedMessageLost"},  # acknowledged and never written
    "failed_switch_keeps_new_ledger": set(),
    "failed_znode_write_counted_persisted": set(),
    # The empty ledger shows at its creation; the acks it then loses need a crash before the next record.
    "switch_before_first_record": set(),
    "marks_nothing": {"LostBookiesMarked"},
    "metadata_before_copy": {"MetadataNamesOnlyHolders"},
    "failed_pass_unmarks": {"LostBookiesMarked"},
    "copies_open_fragment": {"MetadataNamesOnlyHolders"},
}


# The unmutated runs of the score: at least this many traces per spec and mode, over the ci soak's seeds. A 5 %
# rate of false positives fails the baseline test with probability 99.4 %.
BASELINE_TRACES = 100


@pytest.fixture(scope="module")
def score() -> dict[str, Any]:
    """``ledgerspec mutants --json`` on the default workloads: its exit status and its output. Beside the other
    test processes (pytest-xdist), in one process: more would only share the same cores."""
    jobs = ["--jobs", "1"] if os.environ.get("PYTEST_XDIST_WORKER") else []
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(["mutants", "--json", "--baseline-traces", str(BASELINE_TRACES), *jobs])
    return {"status": status, **json.loads(buffer.getvalue())}


def test_every_client_bookie_managed_ledger_topic_and_autorecovery_mutant_is_in_the_score() -> None:
    engine = (
        set(CLIENT_MUTANTS)
        | set(BOOKIE_MUTANTS)
        | set(MANAGED_LEDGER_MUTANTS)
        | set(TOPIC_MUTANTS)
        | set(AUTORECOVERY_MUTANTS)
    )
    assert engine == set(MUTANTS)
    assert set(MUTANTS) >= REQUIRED


def test_every_mutant_is_killed_in_full_observation_with_no_false_positive(score: dict[str, Any]) -> None:
    assert score["status"] == 0
    assert score["total"] == len(MUTANTS)
    assert score["killed"] == score["total"]
    assert score["false_positives"] == 0
    for result in score["mutants"]:
        assert result["full"]["killed"], result["mutant"]
        by = result["full"]["by"]
        assert by["workload"] in {w.name for w in WORKLOADS} and by["trace"] and by["reason"]
    for mode in ("full", "client"):
        assert score["by_mode"][mode]["false_positives"] == 0
        assert score["by_mode"][mode]["baseline_inconclusive"] == 0


def test_a_mutant_that_breaks_a_promise_is_reported_with_it_in_full_observation(score: dict[str, Any]) -> None:
    assert set(PROMISES) == set(MUTANTS)
    for result in score["mutants"]:
        full = result["full"]
        assert set(full["promises"]) == PROMISES[result["mutant"]], result["mutant"]
        if full["promises"]:
            by = full["promise_by"]
            assert by["finding"] == "bug" and by["reason"].startswith(f"violates {by['promises'][0]}")
        else:
            assert full["promise_by"] is None and full["by"]["finding"] == "difference"


def test_the_baseline_covers_every_spec_and_mode_on_the_ci_seeds_and_rejects_nothing(score: dict[str, Any]) -> None:
    """Several seeds, and at least ``BASELINE_TRACES`` traces per spec and mode (the ci soak, ``ledgerspec soak``,
    runs 500: a 1 % rate fails it with probability 99.3 %)."""
    tallies = {(t["spec"], t["mode"]): t for t in score["baseline"]["tallies"]}
    assert set(tallies) == {(spec, mode) for spec in SOAK_WORKLOADS for mode in MODES}
    for key, t in tallies.items():
        assert t["traces"] >= BASELINE_TRACES, key
        assert t["seeds"] == list(PROFILES["ci"].seeds) or t["workloads"] == ["bookie-storage"], key
        assert (t["rejected"], t["inconclusive"]) == (0, 0), (key, t["flagged"][:3])
    assert score["baseline"]["passed"] and score["baseline"]["read_problems"] == 0
    for mode in MODES:
        assert score["by_mode"][mode]["baseline_traces"] == sum(
            t["traces"] for (_, m), t in tallies.items() if m == mode
        )


def test_the_printed_score_gives_the_baselines_size_beside_the_kill_rate(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["mutants", "--workload", "striped", "--mutant", "lac_before_qa", "--traces", "2", "--baseline-traces", "6"]
    assert main([*args, "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    runs = sum(w.run_count() for w in soak_workloads(attrs.evolve(PROFILES["ci"], traces=6), ["ledger"]))
    assert runs >= 6
    assert f"full observation: 1 of 1 killed (100%); unmutated engine: 0 false positive(s) in {runs} traces" in out
    assert "seeds 11-15" in out and f"baseline ledger (client): {runs} traces, 0 rejected, 0 inconclusive" in out


def test_the_client_only_kill_rate_is_reported(score: dict[str, Any]) -> None:
    client = score["by_mode"]["client"]
    assert client["killed"] == sum(r["client"]["killed"] for r in score["mutants"])
    assert client["kill_rate"] == pytest.approx(client["killed"] / score["total"])


def test_a_bookie_that_acks_before_its_fsync_is_caught_at_the_crash(score: dict[str, Any]) -> None:
    [result] = [r for r in score["mutants"] if r["mutant"] == "ack_before_fsync"]
    by = result["full"]["by"]
    assert by["event"] == "BookieCrashes"
    assert "bookie_entries" in by["reason"]


def test_the_same_workload_gives_the_same_traces() -> None:
    workload = LEDGER_WORKLOADS[0].scaled(2)
    first = [lines for _, lines, _ in workload_traces(workload)]
    again = [lines for _, lines, _ in workload_traces(workload)]
    assert first == again
    assert first[0]["full"] != first[1]["full"]


def test_unknown_mutant_or_workload_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--mutant", "no_such_bug"]) == 2
    assert "unknown mutant no_such_bug" in capsys.readouterr().err
    assert main(["mutants", "--workload", "nowhere"]) == 2
    assert "unknown workload nowhere" in capsys.readouterr().err
    assert main(["mutants", "--traces", "0"]) == 2
    assert main(["mutants", "--baseline-traces", "0"]) == 2
    assert "--baseline-traces must be at least 1" in capsys.readouterr().err


# The bookie mutants a ledger trace cannot show, and what the bookie spec's traces catch them by (full mode).
CAUGHT_BY_BOOKIE_TRACES = {
    "mark_before_flush": ("CheckpointPersistsMark", "has not flushed the ledger storage"),
    "mark_not_advanced_in_replay": ("BookieReplaysJournal", "observed mark"),
    "delete_journal_at_mark": ("JournalFileDeleted", "is not wholly before the persisted mark"),
    "mark_moves_backwards": ("CheckpointPersistsMark", "'Recovery log 1 is missing'"),
}


@pytest.mark.parametrize("name", sorted(CAUGHT_BY_BOOKIE_TRACES))
def test_bookie_mutants_are_killed_by_the_bookie_specs_traces(score: dict[str, Any], name: str) -> None:
    [result] = [r for r in score["mutants"] if r["mutant"] == name]
    by = result["full"]["by"]
    event, words = CAUGHT_BY_BOOKIE_TRACES[name]
    assert (by["workload"], by["event"]) == ("bookie-storage", event)
    assert words in by["reason"]
    assert MUTANTS[name].specs == ("bookie",)


def test_a_lost_acknowledged_entry_is_seen_by_the_bookies_clients(score: dict[str, Any]) -> None:
    """mark_before_flush in client observation: after a power loss, the replay starts past an entry that was
    acknowledged and never flushed, and a client's read no longer finds it."""
    [result] = [r for r in score["mutants"] if r["mutant"] == "mark_before_flush"]
    by = result["client"]["by"]
    assert by is not None and by["event"] == "BookieReplaysJournal" and "power-loss" in by["trace"]
    assert "readable has" in by["reason"] and "only in the spec" in by["reason"]


def test_a_mutant_no_chosen_workload_can_show_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--workload", "bookie-storage", "--mutant", "lac_before_qa"]) == 2
    assert "no workload chosen runs mutant lac_before_qa" in capsys.readouterr().err


#: The managed-ledger mutants the cursor workload runs: all but those only a topic's run shows.
CURSOR_WORKLOAD_MUTANTS = sorted(set(MANAGED_LEDGER_MUTANTS) - TOPIC_ONLY_MUTANTS)


@pytest.mark.parametrize("name", CURSOR_WORKLOAD_MUTANTS)
def test_managed_ledger_mutants_are_killed_by_the_cursor_specs_traces(score: dict[str, Any], name: str) -> None:
    [result] = [r for r in score["mutants"] if r["mutant"] == name]
    assert result["full"]["by"]["workload"] == "cursor-restore"
    assert MUTANTS[name].specs == (("cursor", "managed_ledger") if name in TOPIC_MUTANTS else ("cursor",))


#: What the topic's producers see of the managed-ledger mutants only a topic's run shows: after a blind list write the
#: new owner's ledger, written and acknowledged, is gone from the list; a lastConfirmedEntry at the new ledger's
#: (l, -1) after a reopen hides entries from the managed ledger, which no client reads through it.
TOPIC_CLIENTS_SEE = {"blind_ledger_list_write": ["NoAcknowledgedMessageLost"], "reopen_confirms_new_ledger": None}


@pytest.mark.parametrize("name", sorted(TOPIC_ONLY_MUTANTS))
def test_managed_ledger_mutants_only_a_topic_shows_are_killed_by_its_traces(score: dict[str, Any], name: str) -> None:
    [result] = [r for r in score["mutants"] if r["mutant"] == name]
    assert MUTANTS[name].specs == ("managed_ledger",)
    assert result["full"]["killed"] and result["full"]["by"]["workload"] == "topic"
    client = result["client"]
    assert client["traces"] > 0
    if TOPIC_CLIENTS_SEE[name] is None:
        assert not client["killed"]
    else:
        assert client["killed"] and client["by"]["workload"] == "topic"
        assert client["promises"] == TOPIC_CLIENTS_SEE[name], client["by"]["reason"]


def test_the_topics_own_mutant_is_killed_by_the_managed_ledger_specs_traces_in_both_modes(
    score: dict[str, Any],
) -> None:
    """A reopen that forgets the dedup state writes a batch sent again twice: full observation sees the dedup state
    reset at the reopen and names the promise, the clients see the trace leave the spec (where the duplicate is in
    the backlog they report, they name it too: tests/test_managed_ledger_traces.py)."""
    [result] = [r for r in score["mutants"] if r["mutant"] == "forget_dedup_on_open"]
    assert MUTANTS["forget_dedup_on_open"].specs == ("managed_ledger",)
    for mode in ("full", "client"):
        assert result[mode]["killed"] and result[mode]["by"]["workload"] == "topic", mode
    assert result["full"]["promises"] == ["DedupPersistsNoDuplicate"]


#: The cursor mutants a consumer sees break a promise: the restored cursor skips a message it never acknowledged.
#: A restore that ignores cursorsLedgerId = -1 loses what a clean close persisted, which the consumer sees as a
#: difference (the close is visible, not what it wrote). The others lose acknowledgements the broker persisted out
#: of sight, which a client cannot tell from acknowledgements never persisted.
#: A restore that jumps to the last individually acknowledged entry skips the entries between; when the consumer
#: had acknowledged them since the last persist, it sees a restore that covers more than the spec's (a difference),
#: not a skipped message: the first run that kills it may show either. So may a cursor that persists the position it
#: reads next: the restore skips that entry, unless the consumer acknowledged it individually since.
CONSUMER_SEES = {"trim_deletes_needed_ledger", "skip_unconsumed_ledger", "reset_keeps_acks"}
CONSUMER_SEES_A_DIFFERENCE = {"restore_ignores_no_ledger"}
CONSUMER_SEES_EITHER = {"restore_skips_unacked", "persists_read_position"}


@pytest.mark.parametrize("name", CURSOR_WORKLOAD_MUTANTS)
def test_the_cursor_workload_is_checked_as_its_consumer_sees_it(score: dict[str, Any], name: str) -> None:
    [result] = [r for r in score["mutants"] if r["mutant"] == name]
    client = result["client"]
    assert client["traces"] > 0
    if name in CONSUMER_SEES:
        assert client["killed"] and client["by"]["workload"] == "cursor-restore"
        assert client["promises"] == ["CursorSkipsNoUnackedMessage"], client["by"]["reason"]
    elif name in CONSUMER_SEES_A_DIFFERENCE:
        assert client["killed"] and client["by"]["workload"] == "cursor-restore"
        assert client["by"]["finding"] == "difference" and not client["promises"], client["by"]["reason"]
    elif name in CONSUMER_SEES_EITHER:
        assert client["killed"] and client["by"]["workload"] == "cursor-restore"
        assert client["promises"] in ([], ["CursorSkipsNoUnackedMessage"]), client["by"]["reason"]
        assert client["promises"] or client["by"]["finding"] == "difference", client["by"]["reason"]
    else:
        assert not client["killed"]


@pytest.mark.parametrize("name", sorted(AUTORECOVERY_MUTANTS))
def test_autorecovery_mutants_are_killed_in_both_modes_by_its_traces(score: dict[str, Any], name: str) -> None:
    """Full observation and a watcher of the metadata store (the score's client column) both catch each one."""
    [result] = [r for r in score["mutants"] if r["mutant"] == name]
    assert MUTANTS[name].specs == ("autorecovery",)
    workload = "autorecovery-open" if name == "copies_open_fragment" else "autorecovery"  # it needs an open ledger
    for mode in ("full", "client"):
        assert result[mode]["killed"], mode
        assert result[mode]["by"]["workload"] == workload


def test_list_json_names_every_mutant_and_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["mutants"]] == list(MUTANTS)
    lac = data["mutants"][0]
    assert lac == {
        "name": "lac_before_qa",
        "layer": "client",
        "specs": ["ledger"],
        "description": MUTANTS["lac_before_qa"].description,
    }
    assert {w["name"] for w in data["workloads"]} == {w.name for w in WORKLOADS}
    assert all(w["runs"] >= 1 and w["spec"] for w in data["workloads"])
    assert main(["mutants", "--list", "--json", "--mutant", "lac_before_qa", "--workload", "bookie-storage"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["mutants"]] == ["lac_before_qa"] and len(data["workloads"]) == 1
