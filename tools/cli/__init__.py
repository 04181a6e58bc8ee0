"""The ``ledgerspec`` command line: :mod:`.main` parses and dispatches, :mod:`.commands` holds one module each."""
