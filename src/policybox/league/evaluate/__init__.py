"""``policybox evaluate``: a tournament played into a results folder that survives crashes.

This package's own import is light: the command line names the report's file here without loading
the tournament's modules."""

REPORT_FILE = "report.html"  # policybox.league.report's page of a results folder, in the folder
VERSUS_FILE = "versus.json"  # policybox versus's verdict, in its results folder: what makes it a versus folder
