"""A torch stand-in of vLLM 0.29.0's compiled top_k_per_row_decode on its split path, as
csrc/libtorch_stable/sampler.cu's topKPerRowDecode and topKPerRowJob compute it (docs/findings.md
16), for the test that corpus/regressions/V9 reaches the defect: each row of at least 200,000
columns split over 10 pieces, each piece's top k as candidates, the candidates merged by logit.
`top_k_split` has the release's defect (a piece of at most k keys records its logits at column
stride 1, whatever stride1 is); `top_k_split_fixed` reads them at the row's column stride. CPU or
GPU tensors; no vLLM needed."""
import torch

SPLIT_COLUMNS, PIECES = 200 * 1000, 10


def _row(logits, r, n, k, defect):
    row = logits[r]
    raw = logits.as_strided((logits.shape[1],), (1,), logits.storage_offset() + r * logits.stride(0))
    size = n // PIECES
    idx, val = [], []
    for p in range(PIECES):
        start = size * p
        end = n if p == PIECES - 1 else start + size
        if end - start <= k:  # the short-piece shortcut
            for i in range(start, end):
                idx.append(i)
                val.append(float(raw[i]) if defect else float(row[i]))
        else:
            v, i = torch.topk(row[start:end].float(), k)
            idx += (i + start).tolist()
            val += v.tolist()
    order = sorted(range(len(idx)), key=lambda j: -val[j])[:k]
    return [idx[j] for j in order] + [-1] * (k - len(order))


def _topk(logits, next_n, seq_lens, k, out, defect):
    rows, cols = logits.shape
    lens = seq_lens.reshape(-1).tolist()
    for r in range(rows):
        n = max(0, min(cols, lens[r // next_n] - next_n + r % next_n + 1))
        if cols >= SPLIT_COLUMNS and n > k:
            got = _row(logits, r, n, k, defect)
        else:  # the paths below the split (and a short row): the k largest, then -1
            got = (torch.topk(logits[r, :n].float(), min(k, n)).indices.tolist() if n else [])
            got = list(range(n)) if n <= k else got
            got += [-1] * (k - len(got))
        out[r] = torch.tensor(got, dtype=out.dtype)
    return None


def top_k_split(logits, next_n, seq_lens, k, out):
    return _topk(logits, next_n, seq_lens, k, out, True)


def top_k_split_fixed(logits, next_n, seq_lens, k, out):
    return _topk(logits, next_n, seq_lens, k, out, False)
