"""The names every step shares, each spelt once, importable with the standard library alone.

- :mod:`benchlab.names.run_files`: the files of a run directory (``runs/<id>/``);
- :mod:`benchlab.names.results_files`: a results folder's own files (the ledger,
  ``benchmark.json`` and its record ``SavedSpec``, ``versions/``, the report's files);
- :mod:`benchlab.names.report_tables`: the report's tables as ``benchlab report`` keeps them for
  the dashboard (``report-tables.json``), with the key of what they were computed from;
- :mod:`benchlab.names.benchmark_info`: the benchmark record the ledger keeps, and the one
  place a metric's goal is resolved;
- :mod:`benchlab.names.long_format`: the columns of the long-format results table;
- :mod:`benchlab.names.failures`: the failure classes an attempt's end is recorded as (the
  spec's ``retry_on`` choices, triage's verdicts, the backends' own);
- :mod:`benchlab.names.choices`: the statistics' named choices, which the command line declares
  its options with before it loads any statistics;
- :mod:`benchlab.names.extras`: the optional extras, each with the modules it brings, and the one
  line said when one is missing (every optional import goes through it).

This package imports nothing at its top: ``from benchlab import log`` reaches
:mod:`~benchlab.names.run_files` through it inside every training script, and a run script
pays for no more than that.
"""
