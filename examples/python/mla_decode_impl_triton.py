"""The dense MLA decode impl (docs/ops.md section 5) with its attention as a Triton kernel, for
`mlacheck check --python`: mla_decode_impl_torch.py's impl (eager calls; graphs captured per padded
batch, torch.cuda.CUDAGraph on cuda, the recorded call on the host) whose launch is one Triton kernel.
Runs on the cuda backend, and on the host backend in Triton's interpreter (the worker sets
TRITON_INTERPRET=1 there).

    mlacheck check --python examples/python/mla_decode_impl_triton.py:mla_decode_impl --budget 60
    mlacheck check --backend cuda --python examples/python/mla_decode_impl_triton.py:mla_decode_impl --budget 60

The kernel tiles [requests, rows, keys], a row being one (query token, head) of a request: on a
GPU a program takes one request and 16 rows; under the interpreter, where every program costs Python
time, a program takes as many requests and rows as fit tiles of about 2^20 elements, so a call is a
handful of programs. A program walks its requests' keys BLOCK_N at a time through block_table (key p
sits in slot p % page of block block_table[b, p // page]), decodes them exactly (bf16 bits, or fp8
e4m3 codes through a 256-entry table) and keeps an online softmax in fp32 (running max m, sum l,
accumulator acc); the products are fp32 (input_precision "ieee": no TF32), and o is stored as bf16
(rounded to nearest: on a GPU, and in Triton's interpreter under mlacheck's bf16 model,
docs/python.md). Row t attends to keys [0, seq_len - q_len + t + 1); the loop
bound comes from the device seq_lens, so a replayed graph follows the lengths the engine wrote after
capture. A row with no keys writes o = 0 and lse = -inf.
"""
import torch
import triton
import triton.language as tl

from mla_decode_impl_torch import Impl, e4m3_values

LATENT, ROPE = tl.constexpr(512), tl.constexpr(64)  # the latent (= V) and rope parts of a key


@triton.jit
def load_f32(ptr, mask, e4m3, IS_FP8: tl.constexpr):
    """Exact fp32 values of fp8 e4m3 codes (uint8; e4m3 the 256 codes' values) or of bf16 bits (int16)."""
    if IS_FP8:
        return tl.load(e4m3 + tl.load(ptr, mask=mask, other=0).to(tl.int32))
    bits = tl.load(ptr, mask=mask, other=0).to(tl.int32)
    return (bits << 16).to(tl.float32, bitcast=True)


# Strides, sizes and the host bound are not specialized on: one compiled kernel per dtype pair and
# block shape, not per case.
@triton.jit(do_not_specialize=["sq0", "sq1", "sq2", "sq3", "sk0", "sk1", "sk2", "st0", "st1", "so0", "so1", "so2",
                               "so3", "sl0", "sl1", "sl2", "B", "q_len", "H", "W", "page", "host_bound"])
def mla_decode_kernel(q, kv, block_table, seq_lens, o, lse, e4m3, softmax_scale, output_scale,
                      sq0, sq1, sq2, sq3, sk0, sk1, sk2, st0, st1, so0, so1, so2, so3, sl0, sl1, sl2,
                      B, q_len, H, W, page, host_bound,
                      Q_FP8: tl.constexpr, KV_FP8: tl.constexpr, HOST_BOUND: tl.constexpr,
                      BLOCK_B: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Tiles are [requests, rows, ...]: BLOCK_B requests, BLOCK_M (token, head) rows of each.
    bs = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)  # row = t * H + h
    t = rows // H
    h = rows % H
    b3 = bs.to(tl.int64)[:, None, None]
    t3 = t.to(tl.int64)[None, :, None]
    h3 = h.to(tl.int64)[None, :, None]
    d3 = tl.arange(0, LATENT)[None, None, :]
    r3 = tl.arange(0, ROPE)[None, None, :]
    row_ok = (bs < B)[:, None, None] & (rows < q_len * H)[None, :, None]  # [BB, M, 1]

    length = tl.load(seq_lens + bs, mask=bs < B, other=0)  # [BB]
    n = tl.maximum(length[:, None] - q_len + t[None, :] + 1, 0)  # [BB, M]: keys row t attends to
    end = tl.minimum(length, W * page)  # [BB]: keys past it are never read

    q_row = q + b3 * sq0 + t3 * sq1 + h3 * sq2
    q_nope = load_f32(q_row + d3 * sq3, row_ok, e4m3, Q_FP8)  # [BB, M, 512]
    q_rope = load_f32(q_row + (LATENT + r3) * sq3, row_ok, e4m3, Q_FP8)  # [BB, M, 64]

    m_i = tl.full([BLOCK_B, BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_B, BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_B, BLOCK_M, LATENT], tl.float32)

    if HOST_BOUND:
        bound = host_bound  # the buggy twin's: a host value, fixed in a captured graph
    else:
        bound = tl.max(end, axis=0)
    table_rows = block_table + bs.to(tl.int64)[:, None] * st0
    for p0 in range(0, bound, BLOCK_N):
        p = p0 + tl.arange(0, BLOCK_N)
        key_ok = p[None, :] < end[:, None]  # [BB, N]
        blk = tl.load(table_rows + (p // page)[None, :] * st1, mask=key_ok, other=0)
        k_row = kv + blk.to(tl.int64) * sk0 + (p % page).to(tl.int64)[None, :] * sk1  # [BB, N]
        k_nope = load_f32(k_row[:, :, None] + d3 * sk2, key_ok[:, :, None], e4m3, KV_FP8)  # [BB, N, 512] = V
        k_rope = load_f32(k_row[:, :, None] + (LATENT + r3) * sk2, key_ok[:, :, None], e4m3, KV_FP8)  # [BB, N, 64]
        s = tl.dot(q_nope, tl.permute(k_nope, (0, 2, 1)), input_precision="ieee")  # [BB, M, N]
        s = tl.dot(q_rope, tl.permute(k_rope, (0, 2, 1)), s, input_precision="ieee")
        s = s * softmax_scale
        s = tl.where((p[None, None, :] < n[:, :, None]) & key_ok[:, None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=2))
        base = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp(-inf) = 0
        alpha = tl.exp(m_i - base)
        w = tl.exp(s - base[:, :, None])
        l_i = l_i * alpha + tl.sum(w, axis=2)
        acc = tl.dot(w, k_nope, acc * alpha[:, :, None], input_precision="ieee")
        m_i = m_new

    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, :, None] * output_scale
    out = tl.where(empty[:, :, None], 0.0, out)
    row_lse = tl.where(empty, float("-inf"), tl.log(tl.where(empty, 1.0, l_i)) + m_i)
    tl.store(o + b3 * so0 + t3 * so1 + h3 * so2 + d3 * so3, out.to(tl.bfloat16), mask=row_ok)
    lse_at = lse + bs.to(tl.int64)[:, None] * sl0 + t.to(tl.int64)[None, :] * sl1 + h.to(tl.int64)[None, :] * sl2
    tl.store(lse_at, row_lse, mask=(bs < B)[:, None] & (rows < q_len * H)[None, :])


def is_fp8(t):
    return t.dtype not in (torch.bfloat16, torch.float16, torch.float32)


def codes(t):
    """The raw bits the kernel decodes: fp8 e4m3 codes as uint8, bf16 as int16."""
    if is_fp8(t):
        return t.view(torch.uint8)
    if t.dtype != torch.bfloat16:
        raise ValueError("q and kv_cache are bf16 or fp8 e4m3, not %s" % t.dtype)
    return t.view(torch.int16)


def launch(q, kv_cache, block_table, seq_lens, o, lse, softmax_scale, output_scale, host_bound=None):
    """o and lse of every query token; host_bound, when given, is the key loop's bound instead of the
    device seq_lens (the buggy twin's)."""
    B, q_len, H, _ = q.shape
    if B == 0 or q_len == 0 or H == 0:
        return
    W, page = block_table.shape[1], kv_cache.shape[1]
    rows = q_len * H
    if q.is_cuda:  # a program per (request, 16 rows)
        block_b, block_m, block_n, warps, stages = 1, 16, 32, 8, 1
    else:  # the interpreter: few programs; keys [BB, N, 512], acc [BB, M, 512], scores [BB, M, N] <= 2^20
        block_m = triton.next_power_of_2(rows)
        block_n = min(256, triton.next_power_of_2(max(W * page, 1)))
        block_b = max(1, min(triton.next_power_of_2(B), 2048 // block_n, 2048 // block_m,
                             2 ** 20 // (block_m * block_n)))
        warps, stages = 4, 1
    mla_decode_kernel[(triton.cdiv(B, block_b), triton.cdiv(rows, block_m))](
        codes(q), codes(kv_cache), block_table, seq_lens, o, lse, e4m3_values(q.device),
        float(softmax_scale), float(output_scale),
        *q.stride(), *kv_cache.stride(), *block_table.stride(), *o.stride(), *lse.stride(),
        B, q_len, H, W, page, 0 if host_bound is None else int(host_bound),
        Q_FP8=is_fp8(q), KV_FP8=is_fp8(kv_cache), HOST_BOUND=host_bound is not None,
        BLOCK_B=block_b, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)


class TritonImpl(Impl):
    def forward(self, call):
        q_len = call.q.shape[1]
        if call.host_query_lens is not None and any(n != q_len for n in call.host_query_lens):
            raise ValueError("a non-uniform batch (query lengths %s) cannot run as [B, %d]"
                             % (list(call.host_query_lens), q_len))
        launch(call.q, call.kv_cache, call.block_table, call.seq_lens, call.o, call.lse,
               call.base_scale * call.q_scale * call.k_scale, call.k_scale)
        return 1

    def record(self, c):
        """The call a graph of capture c runs: the capture's tensors and scales."""
        def run():
            launch(c.q, c.kv_cache, c.block_table, c.seq_lens, c.o, c.lse, c.base_scale * c.q_scale * c.k_scale,
                   c.k_scale)
        return run


def mla_decode_impl(config, workspace):
    return TritonImpl(config, workspace)
