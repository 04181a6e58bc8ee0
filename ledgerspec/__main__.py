"""``python -m ledgerspec`` runs the command line."""

from ledgerspec.tools.cli import main

raise SystemExit(main())
