"""``python -m ledgerspec`` runs the command line."""

from ledgerspec.tools.cli.main import main

raise SystemExit(main())
