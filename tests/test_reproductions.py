"""The stand-alone reproductions: every finding of kind bug comes with a Java program that shows it against the
released jars without ledgerspec, and each one, run on the pinned jars, does show it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ledgerspec.conformance.adapters.findings import FINDINGS
from ledgerspec.conformance.adapters.jars import ARTIFACTS
from ledgerspec.conformance.adapters.reproductions import export, reproducible, sources
from ledgerspec.tools.cli.main import main


def test_every_bug_and_only_a_bug_comes_with_a_reproduction() -> None:
    bugs = [f.name for f in FINDINGS.values() if f.kind == "bug"]
    assert bugs and [f.name for f in reproducible()] == bugs


def test_each_program_is_a_source_file_with_a_main_and_the_readme_shows_how_to_run_it() -> None:
    files = sources()
    readme = files["README.md"].decode()
    for finding in reproducible():
        main_class, *arguments = finding.reproduction
        source = files[f"{main_class}.java"].decode()
        assert f"public final class {main_class}" in source and "public static void main(String[] args)" in source
        for argument in arguments:  # an argument the program does not take would make it fail, not reproduce
            assert f'"{argument}"' in source, (finding.name, argument)
        assert f"java -cp 'classes:lib/*' {' '.join(finding.reproduction)}" in readme
        assert f"`{' '.join(finding.reproduction)}`" in readme


def test_the_export_holds_the_programs_and_a_pom_of_the_pinned_jars(tmp_path: Path) -> None:
    written = export(tmp_path / "out")
    names = {p.name for p in written}
    assert names == {*sources(), "pom.xml", "settings.xml"} and "ReproCluster.java" in names
    pom = (tmp_path / "out" / "pom.xml").read_text()
    for artifact in ARTIFACTS:
        group, name, version = artifact.split(":")
        assert f"<groupId>{group}</groupId><artifactId>{name}</artifactId><version>{version}</version>" in pom
    assert (tmp_path / "out" / "ReproCluster.java").read_bytes() == sources()["ReproCluster.java"]
    assert (
        "<mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url>"
        in (tmp_path / "out" / "settings.xml").read_text()
    )


def test_the_command_lists_exports_and_refuses_what_it_cannot_reproduce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reproduce", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["finding"] for row in listed] == [f.name for f in reproducible()]
    assert main(["reproduce", "--export", str(tmp_path / "e")]) == 0
    assert "README.md says how to run them" in capsys.readouterr().out
    assert (tmp_path / "e" / "pom.xml").is_file()
    assert main(["reproduce", "fenced-writer-closes-ledger"]) == 2
    assert "a finding of kind difference breaks no promise" in capsys.readouterr().err
    assert main(["reproduce", "no-such-finding"]) == 2
    assert re.search(r"no reproduction of 'no-such-finding'; reproductions: fence-of", capsys.readouterr().err)


@pytest.mark.real_bookkeeper
def test_each_program_reproduces_its_finding_on_the_pinned_jars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["reproduce", "--json", "--keep", str(tmp_path)])
    runs = {r["finding"]: r for r in json.loads(capsys.readouterr().out)["reproductions"]}
    assert set(runs) == {f.name for f in reproducible()}
    for name, r in runs.items():
        assert (r["status"], r["reproduced"]) == (1, True), (name, r["output"][-2000:])
        assert r["expected"] and r["observed"], name
    assert code == 0
    for name in ("fence-of-empty-ledger-lost", "fence-lost-by-db-ledger-storage"):
        assert runs[name]["observed"].startswith("the add was acknowledged as entry 0")
        assert "closed with last entry -1" in runs[name]["observed"]
    assert runs["reset-record-keeps-acks"]["expected"] == "the restored cursor delivers 0:1 0:2 1:0"
    assert runs["reset-record-keeps-acks"]["observed"] == "it delivers 0:1 0:2"
    # The clusters were kept where asked, each JVM's log with them.
    assert (tmp_path / "fence-lost-by-db-ledger-storage" / "bookie-1.log").is_file()
    assert (tmp_path / "reset-record-keeps-acks" / "broker.out").is_file()
