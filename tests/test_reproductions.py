"""The stand-alone reproductions: every finding of kind bug comes with a Java program that shows it against the
released jars without ledgerspec, and each one, run on the pinned jars, does show it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ledgerspec.conformance.adapters.findings import FINDINGS
from ledgerspec.conformance.adapters.jars import ARTIFACTS
from ledgerspec.conformance.adapters.reproductions import export, project_files, reproducible
from ledgerspec.tools.cli.main import main


def test_every_bug_and_only_a_bug_comes_with_a_reproduction() -> None:
    bugs = [f.name for f in FINDINGS.values() if f.kind == "bug"]
    assert bugs and [f.name for f in reproducible()] == bugs


def test_each_project_holds_its_program_a_write_up_and_a_pom_of_the_pinned_versions() -> None:
    pinned = {artifact.rpartition(":")[0]: artifact.rpartition(":")[2] for artifact in ARTIFACTS}
    for finding in reproducible():
        reproduction = finding.reproduction
        assert reproduction is not None
        files = project_files(reproduction.project)
        source = files[f"src/main/java/{reproduction.main_class}.java"].decode()
        assert f"public final class {reproduction.main_class}" in source
        for argument in reproduction.arguments:  # an argument the program does not take fails, not reproduces
            assert f'case "{argument}":' in source, (finding.name, argument)
        readme = files["README.md"].decode()
        assert "## The steps" in readme and "## The cause" in readme and "mvn -q compile exec:exec" in readme
        pom = files["pom.xml"].decode()
        assert f"<argument>{reproduction.main_class}</argument>" in pom
        # The pom's jars are the ones the tests run the program on.
        for group, artifact, version in re.findall(
            r"<groupId>([^<]+)</groupId>\s*<artifactId>([^<]+)</artifactId>\s*<version>([^<]+)</version>", pom
        ):
            if f"{group}:{artifact}" in pinned:
                assert version == pinned[f"{group}:{artifact}"], (reproduction.project, artifact)


def test_the_export_writes_each_project_once_with_settings_for_maven_central(tmp_path: Path) -> None:
    written = export(tmp_path, reproducible())
    projects = {path.relative_to(tmp_path).parts[0] for path in written}
    assert projects == {"fence-of-empty-ledger", "reset-record-keeps-acks"}
    for project in projects:
        for name, text in project_files(project).items():
            assert (tmp_path / project / name).read_bytes() == text
        settings = (tmp_path / project / "settings.xml").read_text()
        assert "<mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url>" in settings


def test_the_command_lists_exports_and_refuses_what_it_cannot_reproduce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reproduce", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["finding"] for row in listed] == [f.name for f in reproducible()]
    assert listed[1] == {
        "finding": "fence-lost-by-db-ledger-storage",
        "project": "fence-of-empty-ledger",
        "program": "FenceOfEmptyLedger db",
        "title": FINDINGS["fence-lost-by-db-ledger-storage"].title,
    }
    assert main(["reproduce", "reset-record-keeps-acks", "--export", str(tmp_path / "e")]) == 0
    assert "wrote reset-record-keeps-acks to" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "e").iterdir()] == ["reset-record-keeps-acks"]
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
    assert code == 0
    for name in ("fence-of-empty-ledger-lost", "fence-lost-by-db-ledger-storage"):
        assert runs[name]["expected"].startswith("the old writer's add fails with LedgerFencedException")
        assert runs[name]["observed"] == "the old writer's add was acknowledged as entry 0"
    assert "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage" in "".join(
        p.read_text() for p in (tmp_path / "fence-lost-by-db-ledger-storage").glob("*/bookie-0.conf")
    )
    assert runs["reset-record-keeps-acks"]["expected"] == "the restored cursor delivers 0:1 0:2 1:0"
    assert runs["reset-record-keeps-acks"]["observed"] == "it delivers 0:1 0:2"
    # Each program's cluster was kept where asked, every JVM's log with it, and the native libraries its killed
    # JVMs unpacked (RocksDB's, 13 MB each) are there too, not left in the machine's temporary directory.
    assert list((tmp_path / "reset-record-keeps-acks").glob("*/first-broker.log"))
    assert list((tmp_path / "fence-lost-by-db-ledger-storage").glob("*/jvm-tmp/librocksdbjni*.so"))
