"""The helper torch_via_helper.py imports: it is what imports torch."""

import torch


def describe() -> str:
    return f"torch {torch.__version__.split('+')[0]} with {torch.get_num_threads()} threads"
