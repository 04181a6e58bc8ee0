"""Stored recordings of the real systems, copied for a test and edited observation by observation."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

#: Changes one observation, or drops it (None).
Edit = Callable[[dict[str, Any]], dict[str, Any] | None]


def edited_copy(recording: Path, tmp_path: Path, edit: Edit | None = None) -> Path:
    """A copy of ``recording`` under ``tmp_path``, each of its observations passed through ``edit``."""
    copy = tmp_path / recording.name
    shutil.copytree(recording, copy)
    if edit is not None:
        observations = [orjson.loads(line) for line in (copy / "observations.ndjson").read_bytes().splitlines()]
        edited = [o for o in (edit(dict(x)) for x in observations) if o is not None]
        (copy / "observations.ndjson").write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in edited))
    return copy
