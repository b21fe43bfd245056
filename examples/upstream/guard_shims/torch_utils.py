"""A shim of vllm.utils.torch_utils for scripts/upstream_guard.sh's test folder: set_random_seed
seeds Python's, NumPy's and torch's generators, the GPU's included, as the test file expects."""
import random

import numpy
import torch


def set_random_seed(seed):
    if seed is None:
        return
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
