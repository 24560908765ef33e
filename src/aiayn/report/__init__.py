"""Reporting for the aggregate stage: statistics over seeds, significance, Tables 2 and 3, plots, paper numbers.

Import the modules themselves (aiayn.report.summary, ...): importing the package loads none of them.
"""
