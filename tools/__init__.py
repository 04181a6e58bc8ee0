"""The tools on top of the specs, the engine and the oracle, one package per job.

- :mod:`.cli`: the ``ledgerspec`` command line, one module per command;
- :mod:`.model_checking`: model checking, by the Python explorer and by TLC, and the two compared;
- :mod:`.proofs`: the quorum rules proved with Z3;
- :mod:`.harness`: the reference engine under crashes everywhere, and the oracle's mutation score;
- :mod:`.recording`: recordings of the real BookKeeper and Pulsar, mapped and checked;
- :mod:`.bench`: benchmarks, each printing figures measured side by side;
- :mod:`.console`: the consoles they print to; :mod:`.gen_protos`: the protobuf modules regenerated.
"""
