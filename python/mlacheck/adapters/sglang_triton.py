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
| sparse_decode | sparse_mla_decode | kernels/ops/attention/dsa/triton_sparse_mla_decode.py `triton_sparse_mla_decode_splitk` (triton_sparse_mla.py's `_sparse_mla_fused_kernel` when it picks one split, else `_sparse_mla_split_k_kernel` and `_sparse_mla_reduce_kernel`) as srt/layers/attention/dsa_backend.py `_forward_triton_decode` (3473-3497) calls it for `dsa_decode_backend = "triton"` (2689-2697) on a bf16 cache |

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

`sparse_decode` takes q as dsa_backend.py hands an already-concatenated q on (2599-2606: q_nope and
q_rope two views of one [tokens, H, 576] buffer, which the launcher addresses by their strides),
the indices as `page_table_1.unsqueeze(1)` (one row of global slots per query token), and returns
out alone, [1, tokens, H, 512], which the adapter copies into mlacheck's out. What the caller
guarantees:
- `lse none`: the function returns no lse, and this path asks for none;
- `clean_indices`: page_table_1 is transform_index_page_table_decode's output, a slot or -1 (the
  kernel masks `slot >= 0` only and reads any other slot unchecked);
- `has_topk_length = 0`, `has_attn_sink = 0`: the triton path passes neither (an attention sink
  raises before it, 2562-2565);
- `scales dtype ue8m0`, and the cache: SGLang's bf16 cache holds 576 bf16 values a token
  ([pool, 1, 576], `get_key_buffer`). mlacheck's case holds fp8_ds_mla tokens; the adapter writes
  the tokens the indices name into that layout as bf16 (`bf16_cache`), each latent value its code
  times its tile scale, then the 64 rope values as they are, and NaN in every other token, where
  mlacheck's cache holds poison. With power-of-two (ue8m0) tile scales the conversion is exact (a
  4-bit significand times 2^k is a bf16 value), so the kernel sees the values the oracle uses. The
  conversion is the one piece of glue here and changes no value; the kernel reads the converted
  copy, so a read of a token it should not read is seen by its values (NaN), not by the guard;
- `precision p bf16`: P is cast to bf16 for P.V (`p_dot = p.to(input_type)`, triton_sparse_mla.py 724).
It needs a GPU: the release's kernel does not run in Triton 3.6's interpreter (a module-level
`tl.constexpr` added to a tensor fails there), so on the host it refuses in one line, unless
MLACHECK_SGLANG_SRC names the CPU stand-in (tests/upstream/fake_sglang) that CI checks its argument
mapping against.
"""
import os
import sys

import torch

try:
    from mlacheck import implements
except ImportError:  # a bare checkout run by file path: the package beside this folder
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from mlacheck import implements

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _loading  # noqa: E402 - this folder's loader (_loading.py)

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


def _load(rel, shims=()):
    """The release's module rel, executed from its own file under a private name (its imports:
    torch, triton, typing, itertools; the shim modules stand for any other while it executes)."""
    name = "sglang_%s__%s" % (VERSION.replace(".", "_"), rel[:-3].replace("/", "__"))
    if name not in sys.modules:
        _loading.exec_file(os.path.join(_root(), rel), name, shims)
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


# ---- sparse MLA decode (sparse_mla_decode, docs/ops.md 4) ----------------------------------------

SPARSE_MLA = "sglang/kernels/ops/attention/dsa/triton_sparse_mla.py"
SPARSE_DECODE = "sglang/kernels/ops/attention/dsa/triton_sparse_mla_decode.py"
STANDIN = "sglang/MLACHECK_STANDIN"  # the stand-in release's mark (tests/upstream/fake_sglang)


def _sm_count(device_id=0):
    """sglang/srt/utils/common.py get_device_core_count, as it answers on CUDA (0 without it)."""
    return torch.cuda.get_device_properties(device_id).multi_processor_count if torch.cuda.is_available() else 0


def _not_on_this_path(*args, **kwargs):
    raise RuntimeError("sglang_triton.py: q8kv8_topk_length_from_indices is the prefill's, not the decode's")


_sparse = None


def sparse_mla():
    """(triton_sparse_mla, triton_sparse_mla_decode) of the release, loaded once. Their imports of
    SGLang's platform queries meet stand-ins with the queries' CUDA answers: fp8 is OCP e4m3 (not
    MI300's fnuz), no gfx95, the GPU's SM count. Without a GPU, the stand-in release only."""
    global _sparse
    if _sparse is None:
        if not torch.cuda.is_available() and not os.path.isfile(os.path.join(_root(), STANDIN)):
            raise RuntimeError("sglang_triton.py: SGLang's Triton sparse MLA decode needs a GPU (--backend cuda): "
                               "Triton 3.6's interpreter cannot run its kernel; on the host, "
                               "MLACHECK_SGLANG_SRC=tests/upstream/fake_sglang checks the adapter's mapping")
        base = _load(SPARSE_MLA, [
            _loading.shim("sglang.kernels.ops.attention.metadata", q8kv8_topk_length_from_indices=_not_on_this_path),
            _loading.shim("sglang.kernels.ops.quantization.fp8_kernel", is_fp8_fnuz=lambda: False),
            _loading.shim("sglang.srt.utils", get_device_core_count=_sm_count, is_gfx95_supported=lambda: False)])
        decode = _load(SPARSE_DECODE, [_loading.shim("sglang.kernels.ops.attention.dsa.triton_sparse_mla",
                                                         **{k: getattr(base, k) for k in dir(base) if not k.startswith("__")})])
        _sparse = (base, decode)
    return _sparse


def bf16_cache(kv_cache, indices):
    """SGLang's bf16 cache [slots, 1, 576] (slot s = block x page + offset at row s) holding the
    tokens of mlacheck's fp8_ds_mla cache u8 [blocks, page, 656] that indices name: each latent value
    its e4m3 code times its tile's scale, rounded to bf16 (exact for ue8m0 scales), then the 64 rope
    values as they are. Every other row is NaN, as every other token of mlacheck's cache is poison:
    only the named tokens are read here, so a far-slot case's reserved cache is read where it is backed."""
    blocks, page = kv_cache.shape[0], kv_cache.shape[1]
    slots = blocks * page
    named = indices.reshape(-1).long()
    named = torch.unique(named[(named >= 0) & (named < slots)])
    cache = torch.full((slots, 1, 576), float("nan"), dtype=torch.bfloat16, device=kv_cache.device)
    tokens = kv_cache[named // page, named % page]  # [n, 656]: the named tokens only
    codes = tokens[:, :512].contiguous().view(torch.float8_e4m3fn).float().view(-1, 4, 128)
    scales = tokens[:, 512:528].contiguous().view(torch.float32).view(-1, 4, 1)
    latent = (codes * scales).view(-1, 512).to(torch.bfloat16)
    rope = tokens[:, 528:656].contiguous().view(torch.bfloat16)
    cache[named, 0] = torch.cat([latent, rope], dim=-1)
    return cache


_workspaces = {}  # per device, as dsa_backend.py keeps one per stream (_triton_sparse_mla_workspaces)

SPARSE_CONTRACT = ["lse none", "clean_indices", "has_topk_length = 0", "has_attn_sink = 0", "scales dtype ue8m0",
                   "precision p bf16"]


@implements("sparse_mla_decode", contract=SPARSE_CONTRACT)
def sparse_decode(q, kv_cache, indices, topk_length, attn_sink, out, lse, softmax_scale):
    """dsa_backend.py 3488-3497: triton_sparse_mla_decode_splitk(q_nope, q_rope, kv=kv_cache,
    indices=page_table_1.unsqueeze(1), sm_scale, d_v=512, workspace=...).squeeze(0), into out."""
    _, decode = sparse_mla()
    heads = q.shape[2]
    q_all = q.view(-1, heads, 576)
    workspace = _workspaces.setdefault(str(q.device), [])
    o = decode.triton_sparse_mla_decode_splitk(
        q_nope=q_all[:, :, :512], q_rope=q_all[:, :, 512:], kv=bf16_cache(kv_cache, indices),
        indices=indices.reshape(-1, indices.shape[-1]).unsqueeze(1), sm_scale=float(softmax_scale), d_v=512,
        workspace=workspace).squeeze(0)
    out.view(-1, heads, 512).copy_(o)
    return None
