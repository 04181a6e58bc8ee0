"""The layers the folders show, held by import-linter's contracts (``[tool.importlinter]`` in pyproject.toml).

The specs import nothing above them, the oracle never imports the engine,
the command line and the benchmarks are on top of the tools. import-linter
reads packages by import name, so the tree is first laid out by the
package-dir mapping of pyproject.toml, as an installed wheel would be.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _laid_out(tmp_path: Path) -> Path:
    """The Python files of every package of pyproject.toml under ``tmp_path``, in folders by import name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for package, folder in config["tool"]["setuptools"]["package-dir"].items():
        target = tmp_path.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in (ROOT / folder).glob("*.py"):
            shutil.copy2(source, target / source.name)
    return tmp_path


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.exists() else [shutil.which("lint-imports") or "lint-imports"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [*command, "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_layering_contract_is_kept(tmp_path: Path) -> None:
    result = _lint_imports(_laid_out(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "imported", "contract"),
    [
        ("conformance/checker.py", "ledgerspec.reference.bookie", "the engine and the oracle on them and apart"),
        ("spec/kernel.py", "ledgerspec.conformance.events", "the specs at the bottom"),
        ("tools/harness/mutants.py", "ledgerspec.tools.cli.main", "the command line and the benchmarks on top"),
        ("tools/model_checking/explorer/levels.py", "ledgerspec.tools.model_checking.tlc.runner", "TLC apart"),
    ],
)
def test_an_import_across_a_layer_is_caught(tmp_path: Path, module: str, imported: str, contract: str) -> None:
    tree = _laid_out(tmp_path)
    source = tree / "ledgerspec" / module
    source.write_text(source.read_text() + f"\nimport {imported}  # across a layer\n")
    result = _lint_imports(tree)
    assert result.returncode == 1
    assert "1 broken" in result.stdout and contract in " ".join(result.stdout.split())
