"""Where Pulsar keeps a managed ledger and its cursors: znode paths.

A topic's managed ledger is named by its persistence naming,
``<tenant>/<namespace>/persistent/<topic>`` (``TopicName.getPersistenceNamingEncoding``;
the older form has a cluster between tenant and namespace), and lives at
``/managed-ledgers/<name>`` (``MetaStoreImpl``'s base node); each durable
cursor is a child znode named after its subscription. The topic and the
subscription are URL-encoded by the broker before they get here, so neither
holds a ``/``.
"""

from __future__ import annotations

__all__ = ["MANAGED_LEDGERS_ROOT", "cursor_path", "managed_ledger_path", "split_path"]

MANAGED_LEDGERS_ROOT = "/managed-ledgers"


def _check_name(name: str) -> None:
    parts = name.split("/")
    if len(parts) not in (4, 5) or parts[-2] != "persistent" or not all(parts):
        raise ValueError(
            f"managed ledger name {name!r} is not <tenant>/<namespace>/persistent/<topic> "
            "(or <tenant>/<cluster>/<namespace>/persistent/<topic>)"
        )


def managed_ledger_path(name: str) -> str:
    """The znode of the managed ledger ``name``."""
    _check_name(name)
    return f"{MANAGED_LEDGERS_ROOT}/{name}"


def cursor_path(name: str, cursor: str) -> str:
    """The znode of cursor ``cursor`` of the managed ledger ``name``."""
    if not cursor or "/" in cursor:
        raise ValueError(f"cursor name {cursor!r} must be non-empty, without '/'")
    return f"{managed_ledger_path(name)}/{cursor}"


def split_path(path: str) -> tuple[str, str | None]:
    """``(managed ledger name, cursor or None)`` of a znode path under ``/managed-ledgers``."""
    prefix = MANAGED_LEDGERS_ROOT + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path!r} is not under {MANAGED_LEDGERS_ROOT}")
    parts = path[len(prefix) :].split("/")
    for cut in (len(parts), len(parts) - 1):
        name = "/".join(parts[:cut])
        if cut in (4, 5) and parts[cut - 2] == "persistent" and all(parts):
            return name, (parts[cut] if cut < len(parts) else None)
    raise ValueError(f"{path!r} names neither a managed ledger nor one of its cursors")
