"""The buggy twins of mla_decode_triton.py, one seeded bug each, under the same contract (its
declared bf16 precision: the slack it allows does not hide a wrong answer):

- `mla_decode_drops_key`: each split of the key range ends one key early (`p < hi - 1`, the
  off-by-one a split bound takes when it is computed as an inclusive end);
- `mla_decode_v_unscaled`: V taken as the raw cache values, without k_scale, while K carries it
  (the scale applied to one of the two operands it scales).

    mlacheck check --python examples/python/mla_decode_triton_buggy.py:mla_decode_drops_key --budget 30   # FAIL
    mlacheck check --python examples/python/mla_decode_triton_buggy.py:mla_decode_v_unscaled --budget 30  # FAIL

Both FAIL mla_decode.equals_oracle on their first cases, with the worst element and its ratio to the
allowed difference.
"""
from mla_decode_triton import CONTRACT, launch


def mla_decode_drops_key(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale,
                         num_splits):
    launch(q, kv_cache, block_table, seq_lens, workspace, o, lse, float(base_scale) * float(q_scale), k_scale,
           num_splits, drop_key=True)


def mla_decode_v_unscaled(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale,
                          num_splits):
    launch(q, kv_cache, block_table, seq_lens, workspace, o, lse, float(base_scale) * float(q_scale), k_scale,
           num_splits, v_unscaled=True)


for _fn in (mla_decode_drops_key, mla_decode_v_unscaled):
    _fn.mlacheck_op = "mla_decode"
    _fn.mlacheck_contract = "\n".join(CONTRACT)
