"""mlacheck adapters for SGLang's Triton kernels of DeepSeek V3.2's sparse attention (its "DSA"
backend), from the release python/upstream.lock pins (SGLang 0.5.23), which
scripts/upstream_cache.sh unpacks into the upstream cache (sglang-<version>; $MLACHECK_SGLANG_SRC
names another unpacked tree, such as the copy with an injected bug, sglang-<version>-bug). The
kernels run as shipped: on a GPU, or on the host in Triton's interpreter; nothing of SGLang is copied
here.

    bash scripts/upstream_cache.sh
    mlacheck check --adapter sglang_triton.transform_index_decode

| callable | op | drives (sglang-0.5.23/...) |
|---|---|---|
| transform_index_decode | topk_to_global | kernels/ops/attention/dsa/transform_index.py `transform_index_page_table_decode` as srt/layers/attention/dsa_backend.py calls it for a decode step (2633-2637, 3930-3934): its tiled kernel for top-k widths other than 2048 |
| transform_index_decode_2048 | topk_to_global | the same function at DeepSeek V3.2's index_topk, 2048, where it takes its one-program-per-row kernel (`transform_index_page_table_decode_kernel`) |

The function maps each query token's top-k token positions to KV slots through `page_table_1`, the
token-granular page table of its metadata (page size 1: one row per query token, its positions'
slots), and fills -1 where an index is negative. mlacheck's topk_to_global at page 1 is that
conversion (docs/ops.md 3), with the request's block-table row as the token's page-table row. Each
adapter declares what dsa_backend.py guarantees:
- `page = 1`: `page_size=1` at both calls, and the function asserts it;
- `decode_lens = 1`: a decode step's page table has one row per query token (the function asserts
  page_table.shape[0] == topk_indices.shape[0]), which for a request's block-table row is one token
  per request (SGLang expands the table per token for speculative steps: another metadata path);
- `locals one-of in-range`: the indexer's top-k picks positions below the request's length (its
  page-table row is max_seqlen_k wide, every position below the length a slot), or -1; the kernel
  reads the page table at any non-negative index unmasked;
- `local contiguous`, `global contiguous`: `result` is made by `torch.empty_like(topk_indices)` and
  topk_indices is the indexer's [tokens, topk] output (`_pad_topk_indices` returns it, or a
  `torch.cat` of it with -1 rows); the 2048 kernel reads row r at r x 2048 whatever the strides.
"""
import importlib.util
import os
import sys

import torch

try:
    from mlacheck import implements
except ImportError:  # a bare checkout run by file path: the package beside this folder
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from mlacheck import implements

VERSION = "0.5.23"  # python/upstream.lock
CACHE = os.environ.get("MLACHECK_UPSTREAM_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mlacheck", "upstream")
TRANSFORM_INDEX = "sglang/kernels/ops/attention/dsa/transform_index.py"


def _root():
    env = os.environ.get("MLACHECK_SGLANG_SRC")
    root = env or os.path.join(CACHE, "sglang-" + VERSION)
    if not os.path.isfile(os.path.join(root, TRANSFORM_INDEX)):
        raise ImportError("sglang_triton.py: SGLang %s's %s is not at %s (%s)" % (
            VERSION, TRANSFORM_INDEX, root, "MLACHECK_SGLANG_SRC" if env else "bash scripts/upstream_cache.sh puts it there"))
    return root


def _load(rel):
    """The release's module rel, executed from its own file under a private name (its imports:
    torch, triton, typing, itertools)."""
    path = os.path.join(_root(), rel)
    name = "sglang_%s__%s" % (VERSION.replace(".", "_"), rel[:-3].replace("/", "__"))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_transform_index = _load(TRANSFORM_INDEX)  # at import: a missing release is one line before any case

CONTRACT = ["page = 1", "decode_lens = 1", "locals one-of in-range", "local contiguous", "global contiguous"]


def _transform(local, block_table, out):
    if local.shape[0] == 0:  # no query token: dsa_backend.py has no decode step to convert
        return None
    _transform_index.transform_index_page_table_decode(page_table=block_table, topk_indices=local, result=out,
                                                      page_size=1)
    return None


@implements("topk_to_global", contract=CONTRACT)
def transform_index_decode(query_start_loc, local, block_table, page, **kw):
    """dsa_backend.py 3930-3934: transform_index_page_table_decode(page_table=metadata.page_table_1,
    topk_indices=topk_indices, page_size=1), writing into mlacheck's `global` (its `result`)."""
    return _transform(local, block_table, kw["global"])


@implements("topk_to_global", contract=CONTRACT + ["k = 2048"])
def transform_index_decode_2048(query_start_loc, local, block_table, page, **kw):
    """The same at DeepSeek V3.2's index_topk: the kernel of one program per row."""
    return _transform(local, block_table, kw["global"])
