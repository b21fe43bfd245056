"""A reproducer for DeepGEMM maintainers, without mlacheck: `deep_gemm.fp8_paged_mqa_logits` on sm90
with a batch in which every request has context length 0. A batch of 32, 64, 96 or 128 such requests
ends in an illegal memory access; 4, 31 or 127 of them, or 128 with one request of length 1, run
(docs/findings.md 14, DeepGEMM 54e2261 on an H100).

Where it comes from, as read (not confirmed with a debugger): with no work at all the schedule's
binary search over the per-request prefix sums (deep_gemm/include/deep_gemm/scheduler/
sm90_paged_mqa_logits.cuh) ends at q_idx = batch_size and reads prefix_sum[batch_size], one past a
shared array of align(batch_size, 32) entries when batch_size is a multiple of 32; every SM is then
given request batch_size, whose context length the kernel's first refresh reads past the end of
context_lens.

    pytest -q examples/upstream/test_deepgemm_empty_batch.py

Needs a Hopper GPU, torch and an importable deep_gemm (scripts/upstream.sh builds revision 54e2261);
skips with the reason otherwise. Each batch runs in a child process of its own, since an illegal
address ends the CUDA context of the process it happens in.
"""
import os
import subprocess
import sys

import pytest

CALL = r"""
import sys, torch, deep_gemm
batch, lens = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
heads, dim, block = 64, 128, 64
lens = (lens * batch)[:batch]
context_lens = torch.tensor(lens, dtype=torch.int32, device="cuda").unsqueeze(1).contiguous()  # [B, next_n = 1]
q = torch.zeros(batch, 1, heads, dim, device="cuda").to(torch.float8_e4m3fn)
cache = torch.zeros(4, block, 1, dim + 4, dtype=torch.uint8, device="cuda")  # block-flat: codes, then fp32 scales
weights = torch.ones(batch, heads, dtype=torch.float32, device="cuda")
table = torch.zeros(batch, 1, dtype=torch.int32, device="cuda")
schedule = deep_gemm.get_paged_mqa_logits_metadata(context_lens, block, deep_gemm.get_num_sms())
logits = deep_gemm.fp8_paged_mqa_logits(q, cache, weights, context_lens, table, schedule, 64, False)
torch.cuda.synchronize()
print("ran", tuple(logits.shape))
"""


def _requirements():
    try:
        import torch
    except ImportError:
        return "skipped: no torch"
    if not torch.cuda.is_available():
        return "skipped: no GPU"
    if torch.cuda.get_device_capability()[0] != 9:
        return "skipped: not a Hopper GPU (the sm90 kernel)"
    try:
        import deep_gemm  # noqa: F401
    except ImportError as e:
        return "skipped: deep_gemm is not importable (%s)" % e
    return None


def run(batch, lens):
    return subprocess.run([sys.executable, "-c", CALL, str(batch), ",".join(map(str, lens))], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, env=dict(os.environ))


@pytest.mark.parametrize("batch, lens", [(4, [0]), (31, [0]), (127, [0]), (128, [1] + [0] * 127)])
def test_batches_that_run(batch, lens):
    why = _requirements()
    if why:
        pytest.skip(why)
    p = run(batch, lens)
    assert p.returncode == 0 and "ran" in p.stdout, p.stdout[-2000:]


@pytest.mark.parametrize("batch", [32, 64, 96, 128])
def test_an_all_empty_batch_of_a_multiple_of_32_requests_runs(batch):
    """Fails on DeepGEMM 54e2261: an illegal memory access (CUDA_ERROR_ILLEGAL_ADDRESS)."""
    why = _requirements()
    if why:
        pytest.skip(why)
    p = run(batch, [0])
    assert p.returncode == 0 and "ran" in p.stdout, p.stdout[-2000:]
