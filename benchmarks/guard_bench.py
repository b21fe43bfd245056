"""What mlacheck.guard() costs per call, on the host: a torch CPU custom op (tests/python/guard/
guard_ops.py's copy_rows) called plainly and under the guard, for outputs that are small views of
buffers of several sizes, and a user's test file (tests/python/guard/test_user_suite.py, its clean
tests) run by pytest with and without --mlacheck-guard; and a test body of one op call and a
row-by-row reference check (small aten ops, which the guard must leave alone).

    MLACHECK_GUARD_LIB=build/default/core/libmlacheck_guard.so PYTHONPATH=python \\
        .venv/bin/python benchmarks/guard_bench.py [--repeats 200]

Prints a table (median microseconds a call, plain and guarded, and the ratio) and the pytest wall
times; docs/guard.md states what was measured."""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "guard"))
import guard_ops  # noqa: E402,F401
import mlacheck  # noqa: E402


def per_call(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (each plain call then synchronizes too)")
    p.add_argument("--no-pytest", action="store_true", help="leave out the pytest file")
    a = p.parse_args()
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.set_num_threads(1)
    print("on %s" % (torch.cuda.get_device_name() if a.device == "cuda" else "the host"))
    print("%-44s %12s %12s %7s" % ("call (out: 4 rows x 64 fp32 of a buffer of)", "plain us", "guarded us", "ratio"))
    for rows in (4, 4096, 65536, 1 << 20):
        buf = torch.zeros(rows + 4, 64, device=a.device)
        x = torch.randn(4, 64, device=a.device)
        op = torch.ops.mlacheck_test.copy_rows
        plain = per_call(lambda: (op(x, buf[:4]), sync()), a.repeats)
        with mlacheck.guard(save=None):
            guarded = per_call(lambda: (op(x, buf[:4]), sync()), max(5, a.repeats // (1 + rows // 4096)))
        size = buf.numel() * 4
        label = "%d rows (%s)" % (rows + 4, "%.1f MiB" % (size / 2 ** 20) if size >= 2 ** 20 else "%d B" % size)
        print("%-44s %12.1f %12.1f %6.1fx" % (label, plain, guarded, guarded / plain))
    # A test body as kernel tests write them: one op call, then a reference check row by row (each
    # row a handful of small aten ops, as vLLM's validate_topk_against_reference does). The guard
    # watches the one call; the row loop's aten ops must not pay for it.
    rows = 2000
    logits = torch.randn(rows, 3000, device=a.device)
    ends = torch.arange(1, rows + 1)

    def body():
        buf = torch.zeros(8, 64, device=a.device)
        torch.ops.mlacheck_test.copy_rows(torch.ones(4, 64, device=a.device), buf[:4])
        want = torch.empty(rows, 2048, dtype=torch.int64, device=a.device)
        for i in range(rows):
            e = int(ends[i])
            k = min(2048, e)
            want[i, :k] = logits[i, :e].topk(k)[1]
            set(want[i, :k].tolist())
        sync()
    body()
    plain = per_call(body, 3)
    with mlacheck.guard(save=None):
        guarded = per_call(body, 3)
    print("%-44s %12.0f %12.0f %6.2fx" % ("a test body: 1 call + a %d-row reference loop" % rows, plain, guarded,
                                          guarded / plain))
    if a.no_pytest:
        return
    suite = os.path.join(ROOT, "tests", "python", "guard", "test_user_suite.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]))
    for flags in ([], ["--mlacheck-guard"]):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-p", "mlacheck", "-p", "no:cacheprovider", "-q", suite, "-k",
                        "not buggy"] + flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/tmp")
        print("pytest %-28s %.2f s wall (process start included)" % (" ".join(flags) or "(plain)",
                                                                    time.perf_counter() - t0))


if __name__ == "__main__":
    main()
