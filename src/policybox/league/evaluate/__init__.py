"""``policybox evaluate``: a tournament played into a results folder that survives crashes."""
