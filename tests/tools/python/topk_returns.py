"""A --python callable that returns its answer instead of writing out (tests/tools/python_cli_test.cpp)."""
import torch


def topk_decode(logits, next_n, seq_lens, k, out):
    return torch.zeros_like(out)
