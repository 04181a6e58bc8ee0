"""Benchmarks, run as ``python -m ledgerspec.tools.bench.<name>`` (and by tox): each prints the figures it
measures side by side in one run, and their ratios."""
