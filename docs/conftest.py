"""Run the examples in docs/*.md as tests.

Each page runs with ``tempfile``'s directory set to one of its own, removed
when the page is done: the examples create scratch directories the way a
reader would (``tempfile.mkdtemp()``), and the test run leaves none behind.
"""

import shutil
import tempfile
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE
from typing import Any

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser


def _setup(namespace: dict[str, Any]) -> None:
    namespace["__scratch__"] = (tempfile.tempdir, tempfile.mkdtemp(prefix="ledgerspec-docs-"))
    tempfile.tempdir = namespace["__scratch__"][1]


def _teardown(namespace: dict[str, Any]) -> None:
    before, scratch = namespace["__scratch__"]
    tempfile.tempdir = before
    shutil.rmtree(scratch, ignore_errors=True)


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE)],
    patterns=["*.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
