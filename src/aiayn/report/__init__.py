"""Reporting for the aggregate stage: statistics over seeds, significance, Tables 2 and 3, plots, paper numbers."""

from aiayn.report.collect import RunRecord, collect_runs
from aiayn.report.stats import CI, PairedResult, mean_ci, paired_test
from aiayn.report.summary import aggregate

__all__ = ["CI", "PairedResult", "RunRecord", "aggregate", "collect_runs", "mean_ci", "paired_test"]
