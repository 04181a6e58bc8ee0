"""Each subsystem's one table of spec constants and run settings: it names real constants and real fields, and
reads the same both ways."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from ledgerspec.reference.autorecovery.run import SPEC_CONSTANTS as AUTORECOVERY_CONSTANTS
from ledgerspec.reference.autorecovery.run import RunConfig as AutorecoveryConfig
from ledgerspec.reference.constants import ConstantsTable
from ledgerspec.reference.ledger.simulation import SPEC_CONSTANTS as LEDGER_CONSTANTS
from ledgerspec.reference.ledger.simulation import SimulationConfig
from ledgerspec.reference.managed_ledger.run import SPEC_CONSTANTS as CURSOR_CONSTANTS
from ledgerspec.reference.managed_ledger.run import RunConfig as CursorConfig
from ledgerspec.reference.managed_ledger.topic_run import SPEC_CONSTANTS as TOPIC_CONSTANTS
from ledgerspec.reference.managed_ledger.topic_run import TopicRunConfig
from ledgerspec.spec import catalog

# (spec, table, configuration class, a configuration other than the default in every field of the table)
TABLES = [
    (
        "ledger",
        LEDGER_CONSTANTS,
        SimulationConfig,
        SimulationConfig(
            bookies=5, ensemble=4, write_quorum=3, ack_quorum=1, recoverers=2, max_entries=3, throttle=1,
            max_crashes=1, max_loss=3,
        ),
    ),
    (
        "autorecovery",
        AUTORECOVERY_CONSTANTS,
        AutorecoveryConfig,
        AutorecoveryConfig(
            bookies=5, ensemble=4, write_quorum=3, entries=4, segments=2, workers=2, max_stops=1,
            max_disk_losses=0, max_worker_crashes=2,
        ),
    ),
    ("cursor", CURSOR_CONSTANTS, CursorConfig, CursorConfig(3, 4, 2)),
    (
        "managed_ledger",
        TOPIC_CONSTANTS,
        TopicRunConfig,
        TopicRunConfig(2, 4, 2, True, 3, 5, 1, 2),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "table", "config_class", "config"), TABLES, ids=[t[0] for t in TABLES])
def test_a_table_names_constants_of_its_spec_and_fields_of_its_configuration(
    spec: str, table: ConstantsTable, config_class: type, config: Any
) -> None:
    assert set(table.names) <= set(catalog.find(spec).python().values)
    fields = {f.name for f in attrs.fields(config_class)}
    assert set(table.fields.values()) <= fields


@pytest.mark.parametrize(("spec", "table", "config_class", "config"), TABLES, ids=[t[0] for t in TABLES])
def test_a_configuration_is_built_back_from_the_constants_it_stands_for(
    spec: str, table: ConstantsTable, config_class: type, config: Any
) -> None:
    constants = table.constants(config)
    assert constants != table.constants(config_class())  # the example sets something
    assert table.configure(config_class(), constants) == config


def test_a_constant_no_run_sets_is_refused_with_the_ones_it_takes() -> None:
    with pytest.raises(KeyError, match="a run sets no Bug; the constants a run takes: MaxEntriesPerLedger"):
        CURSOR_CONSTANTS.configure(CursorConfig(), {"MaxEntriesPerLedger": 3, "Bug": "none"})


def test_the_ledger_runs_constants_bound_the_faults_they_leave_out() -> None:
    config = SimulationConfig(faults=frozenset({"restart"}), max_crashes=3, max_loss=2)
    assert config.spec_constants()["MaxCrashes"] == config.spec_constants()["MaxLoss"] == 0
    assert LEDGER_CONSTANTS.constants(config)["MaxCrashes"] == 3
