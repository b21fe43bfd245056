"""A split-KV dense MLA decode (docs/ops.md section 5, op `mla_decode`) in Triton, written the way
vLLM's Triton MLA decode is (vllm/v1/attention/ops/triton_decode_attention.py,
`_fwd_grouped_kernel_stage1` and `_fwd_kernel_stage2`): a first kernel runs each split of each
request's keys with an online softmax and writes (acc / l, m + ln l) into the fp32 split workspace,
a second merges the splits by log-sum-exp. It computes in the precision such kernels ship:

- K and V are dequantized in fp32 (fp8 e4m3 code, or bf16, times k_scale);
- Q.K is `tl.dot` at Triton's default precision: on an NVIDIA GPU fp32 operands go through TF32,
  so K is rounded to 10 mantissa bits (q, bf16 or fp8, is exact there);
- P.V takes P and V rounded to bf16 (`tl.dot(p.to(bf16), v.to(bf16))`), fp32 sums.

It declares that precision in its contract (`precision kv bf16`: K and V as rounded as bf16 at
worst; `precision p bf16`), so mlacheck's slack follows what the kernel really computes
(docs/ops.md 7, "Declared precision"); without the declaration cases where V cancels fail at many
times the fp32 slack, though nothing is wrong.

    mlacheck check --python examples/python/mla_decode_triton.py:mla_decode --budget 60
    mlacheck check --backend cuda --python examples/python/mla_decode_triton.py:mla_decode --budget 60

Its twins carry one bug each, written as such bugs are (mla_decode_triton_buggy.py):
`mla_decode_drops_key` ends each split one key early, `mla_decode_v_unscaled` takes V without
k_scale. Both are caught on their first cases, under the same declared precision.

Under Triton's interpreter (the host backend) a program takes as many requests and rows as fit
tiles of about 2^20 elements, as mla_decode_impl_triton.py does; on a GPU one request and 16 rows.
"""
import torch
import triton
import triton.language as tl

from mla_decode_impl_torch import e4m3_values
from mla_decode_impl_triton import LATENT, ROPE, codes, is_fp8, load_f32

# Strides, sizes and scales are not specialized on: one compiled kernel per dtype pair and tiles.
_NOSPEC = ["sq0", "sq1", "sq2", "sq3", "sk0", "sk1", "sk2", "st0", "st1", "B", "q_len", "H", "W", "page", "S"]


@triton.jit(do_not_specialize=_NOSPEC + ["softmax_scale", "k_scale"])
def split_kernel(q, kv, block_table, seq_lens, ws, e4m3, softmax_scale, k_scale,
                 sq0, sq1, sq2, sq3, sk0, sk1, sk2, st0, st1, B, q_len, H, W, page, S,
                 Q_FP8: tl.constexpr, KV_FP8: tl.constexpr, DROP_KEY: tl.constexpr, V_UNSCALED: tl.constexpr,
                 BLOCK_B: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Split tl.program_id(2) of BLOCK_B requests x BLOCK_M (token, head) rows: keys [s c, min((s + 1) c,
    len)) with c = ceil(len / S), row t of a request of length len seeing its first len - q_len + t + 1."""
    split = tl.program_id(2)
    bs = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)  # row = t * H + h
    t = rows // H
    h = rows % H
    b3 = bs.to(tl.int64)[:, None, None]
    t3 = t.to(tl.int64)[None, :, None]
    h3 = h.to(tl.int64)[None, :, None]
    d3 = tl.arange(0, LATENT)[None, None, :]
    r3 = tl.arange(0, ROPE)[None, None, :]
    row_ok = (bs < B)[:, None, None] & (rows < q_len * H)[None, :, None]

    length = tl.load(seq_lens + bs, mask=bs < B, other=0)  # [BB]
    n = tl.maximum(length[:, None] - q_len + t[None, :] + 1, 0)  # [BB, M]: keys row t attends to
    chunk = (length + S - 1) // S
    lo = split * chunk
    hi = tl.minimum(tl.minimum(lo + chunk, length), W * page)  # [BB]: this split's keys
    if DROP_KEY:
        hi = tl.maximum(hi - 1, lo)  # the seeded bug: each split ends one key early

    q_row = q + b3 * sq0 + t3 * sq1 + h3 * sq2
    q_nope = load_f32(q_row + d3 * sq3, row_ok, e4m3, Q_FP8)  # [BB, M, 512], exact
    q_rope = load_f32(q_row + (LATENT + r3) * sq3, row_ok, e4m3, Q_FP8)  # [BB, M, 64]

    m_i = tl.full([BLOCK_B, BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_B, BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_B, BLOCK_M, LATENT], tl.float32)
    table_rows = block_table + bs.to(tl.int64)[:, None] * st0
    for p0 in range(tl.min(tl.where(bs < B, lo, 2147483647), axis=0), tl.max(hi, axis=0), BLOCK_N):
        p = p0 + tl.arange(0, BLOCK_N)
        key_ok = (p[None, :] >= lo[:, None]) & (p[None, :] < hi[:, None])  # [BB, N]
        blk = tl.load(table_rows + (p // page)[None, :] * st1, mask=key_ok, other=0)
        k_row = kv + blk.to(tl.int64) * sk0 + (p % page).to(tl.int64)[None, :] * sk1  # [BB, N]
        k_raw = load_f32(k_row[:, :, None] + d3 * sk2, key_ok[:, :, None], e4m3, KV_FP8)  # [BB, N, 512]
        k_nope = k_raw * k_scale
        k_rope = load_f32(k_row[:, :, None] + (LATENT + r3) * sk2, key_ok[:, :, None], e4m3, KV_FP8) * k_scale
        s = tl.dot(q_nope, tl.permute(k_nope, (0, 2, 1)))  # [BB, M, N]; TF32 on a GPU
        s = tl.dot(q_rope, tl.permute(k_rope, (0, 2, 1)), s)
        s = s * softmax_scale
        s = tl.where((p[None, None, :] < n[:, :, None]) & key_ok[:, None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=2))
        base = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp(-inf) = 0
        alpha = tl.exp(m_i - base)
        w = tl.exp(s - base[:, :, None])
        l_i = l_i * alpha + tl.sum(w, axis=2)
        if V_UNSCALED:
            v = k_raw  # the seeded bug: V taken without k_scale
        else:
            v = k_nope
        acc = tl.dot(w.to(tl.bfloat16), v.to(tl.bfloat16), acc * alpha[:, :, None])  # P.V in bf16, fp32 sums
        m_i = m_new

    empty = l_i == 0.0
    part = acc / tl.where(empty, 1.0, l_i)[:, :, None]
    part_lse = tl.where(empty, float("-inf"), tl.log(tl.where(empty, 1.0, l_i)) + m_i)
    # ws [B, q_len, H, S, 513], contiguous: row (b, t, h) at ((b * q_len + t) * H + h) * S * 513.
    row_at = ((bs.to(tl.int64)[:, None] * q_len + t.to(tl.int64)[None, :]) * H + h.to(tl.int64)[None, :]) * S * 513
    at = ws + row_at + split * 513  # [BB, M]
    tl.store(at[:, :, None] + d3, part, mask=row_ok)
    tl.store(at + 512, part_lse, mask=(bs < B)[:, None] & (rows < q_len * H)[None, :])


@triton.jit(do_not_specialize=["R", "S", "q_len", "H", "so0", "so1", "so2", "so3", "sl0", "sl1", "sl2"])
def merge_kernel(ws, o, lse, R, S, q_len, H, so0, so1, so2, so3, sl0, sl1, sl2, BLOCK_R: tl.constexpr):
    """Rows [pid * BLOCK_R, ...) of R = B * q_len * H: the non-empty splits merged by log-sum-exp."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    ok = r < R
    d = tl.arange(0, LATENT)[None, :]
    row = ws + r.to(tl.int64) * S * 513  # [BR]
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    for s in range(0, S):
        m = tl.maximum(m, tl.load(row + s * 513 + 512, mask=ok, other=float("-inf")))
    base = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([BLOCK_R, LATENT], tl.float32)
    total = tl.zeros([BLOCK_R], tl.float32)
    for s in range(0, S):
        w = tl.exp(tl.load(row + s * 513 + 512, mask=ok, other=float("-inf")) - base)
        acc += w[:, None] * tl.load(row[:, None] + s * 513 + d, mask=ok[:, None] & (w[:, None] > 0), other=0.0)
        total += w
    empty = total == 0.0
    out = tl.where(empty[:, None], 0.0, acc / tl.where(empty, 1.0, total)[:, None])
    b = (r // H) // q_len
    t = (r // H) % q_len
    h = r % H
    o_at = o + b.to(tl.int64) * so0 + t.to(tl.int64) * so1 + h.to(tl.int64) * so2
    tl.store(o_at[:, None] + d * so3, out.to(tl.bfloat16), mask=ok[:, None])
    tl.store(lse + b.to(tl.int64) * sl0 + t.to(tl.int64) * sl1 + h.to(tl.int64) * sl2,
             tl.where(empty, float("-inf"), tl.log(tl.where(empty, 1.0, total)) + m), mask=ok)


def launch(q, kv_cache, block_table, seq_lens, workspace, o, lse, softmax_scale, k_scale, num_splits,
           drop_key=False, v_unscaled=False):
    B, q_len, H, _ = q.shape
    S = int(num_splits)
    if B == 0 or q_len == 0 or H == 0:
        return
    if S < 1:
        raise ValueError("num_splits is %d, not >= 1" % S)
    W, page = block_table.shape[1], kv_cache.shape[1]
    rows = q_len * H
    ws = workspace.reshape(-1)[: B * q_len * H * S * 513]
    if q.is_cuda:  # a program per (request, 16 rows, split)
        block_b, block_m, block_n, warps = 1, 16, 32, 8
    else:  # the interpreter: few programs; keys [BB, N, 512], acc [BB, M, 512], scores [BB, M, N] <= 2^20
        block_m = triton.next_power_of_2(rows)
        block_n = min(256, triton.next_power_of_2(max(triton.cdiv(W * page, S), 1)))
        block_b = max(1, min(triton.next_power_of_2(B), 2048 // block_n, 2048 // block_m,
                             2 ** 20 // (block_m * block_n)))
        warps = 4
    split_kernel[(triton.cdiv(B, block_b), triton.cdiv(rows, block_m), S)](
        codes(q), codes(kv_cache), block_table, seq_lens, ws, e4m3_values(q.device),
        float(softmax_scale), float(k_scale), *q.stride(), *kv_cache.stride(), *block_table.stride(),
        B, q_len, H, W, page, S, Q_FP8=is_fp8(q), KV_FP8=is_fp8(kv_cache), DROP_KEY=drop_key,
        V_UNSCALED=v_unscaled, BLOCK_B=block_b, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=1)
    R = B * rows
    block_r = 16 if q.is_cuda else min(triton.next_power_of_2(R), 2048)
    merge_kernel[(triton.cdiv(R, block_r),)](ws, o, lse, R, S, q_len, H, *o.stride(), *lse.stride(), BLOCK_R=block_r)


# The precision it computes in (the module's docstring): K and V rounded at worst to bf16 (TF32 in
# Q.K, bf16 in P.V), P rounded to bf16. q, bf16 or fp8, is exact in TF32.
CONTRACT = ["precision kv bf16", "precision p bf16"]


def mla_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits):
    """Softmax scale base_scale x q_scale (K already carries k_scale), V times k_scale: docs/ops.md 5."""
    launch(q, kv_cache, block_table, seq_lens, workspace, o, lse, float(base_scale) * float(q_scale), k_scale,
           num_splits)


mla_decode.mlacheck_op = "mla_decode"  # what @mlacheck.implements("mla_decode", contract=...) sets
mla_decode.mlacheck_contract = "\n".join(CONTRACT)
