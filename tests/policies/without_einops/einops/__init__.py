"""Stands in for a machine without einops: importing it fails as a missing package does."""

raise ModuleNotFoundError("No module named 'einops'", name="einops")
