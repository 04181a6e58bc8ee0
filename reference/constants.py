"""The spec constants a run configuration of the engine stands for: one table per subsystem, read both ways.

A subsystem's run configuration (the ledger simulation's, a cursor run's, an
autorecovery run's) has fields that are constants of its spec under the
engine's names: ``bookies`` is the ledger spec's ``NumBookies``. Each
subsystem names that correspondence once, as a :class:`ConstantsTable`
beside its configuration class. The configuration gives the spec constants
its runs are checked under by the table, and the command line builds a
configuration from ``--const NAME=VALUE`` by the same table, so the two
directions cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

__all__ = ["ConstantsTable"]

C = TypeVar("C")


@attrs.frozen
class ConstantsTable:
    """Spec constant name -> the run configuration's field of the same meaning."""

    fields: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        """The spec constants a run configuration sets."""
        return tuple(self.fields)

    def constants(self, config: object) -> dict[str, Any]:
        """The spec constants ``config`` stands for."""
        return {name: getattr(config, field) for name, field in self.fields.items()}

    def configure(self, config: C, values: Mapping[str, Any]) -> C:
        """``config`` with the fields the constants in ``values`` name set to their values.

        Raises :class:`KeyError` naming the constants the table does not have.
        """
        unknown = [name for name in values if name not in self.fields]
        if unknown:
            raise KeyError(f"a run sets no {', '.join(unknown)}; the constants a run takes: {', '.join(self.names)}")
        return attrs.evolve(config, **{self.fields[name]: value for name, value in values.items()})  # type: ignore[misc]
