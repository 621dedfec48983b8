"""The agent-process side: policy runtime (shared with inline mode) and the cell bootstrap."""
