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


def moved_copy(recording: Path, tmp_path: Path, moved: set[int], before: int, edit: Edit | None = None) -> Path:
    """A copy of ``recording`` with the observations numbered ``moved`` taken to just before observation
    ``before``, as if they had reached the harness first; the observations are numbered again in the new order,
    then each passed through ``edit``, if given."""
    copy = tmp_path / recording.name
    shutil.copytree(recording, copy)
    observations = [orjson.loads(line) for line in (copy / "observations.ndjson").read_bytes().splitlines()]
    taken = [o for o in observations if o["obs"] in moved]
    rest = [o for o in observations if o["obs"] not in moved]
    assert len(taken) == len(moved), f"no observations {sorted(moved - {o['obs'] for o in taken})}"
    at = next(i for i, o in enumerate(rest) if o["obs"] == before)
    reordered = rest[:at] + taken + rest[at:]
    for number, o in enumerate(reordered):
        o["obs"] = number
    if edit is not None:
        reordered = [o for o in (edit(x) for x in reordered) if o is not None]
    (copy / "observations.ndjson").write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in reordered))
    return copy
