"""The dense MLA decode impl an engine holds (docs/ops.md section 5), in torch, for `mlacheck check
--python`: eager calls, and graphs captured once per padded batch over fixed buffers and replayed
after the engine writes a new step into them (torch.cuda.CUDAGraph on cuda; on the host a graph is
the recorded call, run again over the same tensors).

    mlacheck check --python examples/python/mla_decode_impl_torch.py:mla_decode_impl --budget 30

mla_decode_impl(config, workspace) makes the impl; forward(call) returns its split count; capture(c)
returns a graph, replay(graph) runs it. Every shape is fixed by the tensors, never by a value read
back from the device, so the same code is capturable.
"""
import torch

E4M3 = None


def e4m3_values(device):
    """The 256 fp8 e4m3fn codes as float32 (bias 7, 0x7f / 0xff NaN)."""
    global E4M3
    if E4M3 is None or E4M3.device != device:
        v = []
        for code in range(256):
            s = -1.0 if code & 0x80 else 1.0
            e, m = (code >> 3) & 0xF, code & 0x7
            v.append(float("nan") if (e, m) == (0xF, 0x7) else s * (m / 8.0 * 2.0 ** -6 if e == 0 else
                                                                     (1.0 + m / 8.0) * 2.0 ** (e - 7)))
        E4M3 = torch.tensor(v, dtype=torch.float32, device=device)
    return E4M3


def decoded(t):
    """fp32 values of a bf16 tensor or of fp8 e4m3 codes (lent as float8_e4m3fn or uint8)."""
    if t.dtype in (torch.bfloat16, torch.float16, torch.float32):
        return t.float()
    return e4m3_values(t.device)[t.view(torch.uint8).long()]


def attend(q, kv_cache, block_table, seq_lens, o, lse, softmax_scale, output_scale, lengths=None):
    """o and lse of every query token; lengths, when given, replace the device seq_lens."""
    B, q_len, H, _ = q.shape
    page, W = kv_cache.shape[1], block_table.shape[1]
    P = W * page
    if B == 0 or q_len == 0:
        return
    if P == 0:  # no keys at all: every row is empty
        o.zero_()
        lse.fill_(float("-inf"))
        return
    device = q.device
    p = torch.arange(P, device=device)
    blocks = block_table.long()[:, p // page].clamp(min=0, max=max(kv_cache.shape[0] - 1, 0))  # [B, P]
    keys = decoded(kv_cache[blocks, (p % page)[None, :].expand(B, P)])  # [B, P, 576]
    L = seq_lens.long() if lengths is None else lengths
    t = torch.arange(q_len, device=device)
    n = (L[:, None] - q_len + t[None, :] + 1).clamp(min=0)  # [B, q_len]
    live = p[None, None, :] < n[:, :, None]  # [B, q_len, P]
    # Slots past a request's keys hold anything (NaN codes included): never multiplied in.
    keys = torch.where((p[None, :] < L[:, None])[..., None], keys, torch.zeros_like(keys))
    scores = torch.einsum("bthd,bpd->bthp", decoded(q), keys) * softmax_scale
    scores = scores.masked_fill(~live[:, :, None, :], float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    weights = torch.exp(scores - m)
    total = weights.sum(dim=-1, keepdim=True)
    out = torch.einsum("bthp,bpd->bthd", weights, keys[..., :512]) / total.clamp(min=1e-30) * output_scale
    empty = total == 0
    o.copy_(torch.where(empty, torch.zeros_like(out), out).to(o.dtype))
    lse.copy_(torch.where(empty, torch.full_like(total, float("-inf")), torch.log(total) + m).squeeze(-1))


class Impl:
    def __init__(self, config, workspace):
        self.config = config
        self.workspace = workspace  # mlacheck's split scratch: not needed by this impl

    def forward(self, call):
        q_len = call.q.shape[1]
        if call.host_query_lens is not None and any(n != q_len for n in call.host_query_lens):
            raise ValueError("a non-uniform batch (query lengths %s) cannot run as [B, %d]"
                             % (list(call.host_query_lens), q_len))
        attend(call.q, call.kv_cache, call.block_table, call.seq_lens, call.o, call.lse,
               call.base_scale * call.q_scale * call.k_scale, call.k_scale)
        return 1

    def record(self, c):
        """The call a graph of capture c runs: the capture's tensors and scales."""
        def run():
            attend(c.q, c.kv_cache, c.block_table, c.seq_lens, c.o, c.lse, c.base_scale * c.q_scale * c.k_scale,
                   c.k_scale)
        return run

    def capture(self, c):
        run = self.record(c)
        if not c.q.is_cuda:
            return run
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()  # warm up outside the graph (allocator, lazy init)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        return graph

    def replay(self, graph):
        graph() if callable(graph) else graph.replay()


def mla_decode_impl(config, workspace):
    return Impl(config, workspace)
