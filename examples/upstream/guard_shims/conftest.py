"""The conftest of the test folder scripts/upstream_guard.sh builds: vLLM's test file imports
torch.ops._C's top-k ops, which vLLM registers when it loads its compiled library; here that library
is the one $VLLM_TOPK_LIB names (a file beside this one, or a path), loaded before the test file is
imported. The folder's vllm/ package (shims of vllm.platforms and vllm.utils.torch_utils) comes
first on sys.path, so an installed vLLM is never imported."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
LIBRARY = os.environ.get("VLLM_TOPK_LIB", "libvllm_topk_clean.so")
if not os.path.isabs(LIBRARY):
    LIBRARY = os.path.join(os.path.dirname(HERE), LIBRARY)
torch.ops.load_library(LIBRARY)


def pytest_report_header(config):
    return "vLLM top-k ops from %s" % LIBRARY
