"""Every shipped adapter's contract parses against its op's terms, in CI, without the upstream
libraries. The adapters' modules import vLLM, FlashMLA or DeepGEMM (and some need a GPU), so CI
cannot load them; their `@implements(OP, contract=...)` decorators are read from the source with
`ast` (a contract is a list of strings, a module-level list, or a sum of those), written into one
stand-in module of functions with the same decorators, and `mlacheck list` loads it: a clause that
names no term of its op, or one the op does not take, is its one-line error and exit 2 (as
`batch_rows rounding` on mla_decode was, written into FlashMLA's dense adapter and caught here).
Label upstream, ctest upstream.vllm."""
import ast
import glob
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
ADAPTERS = os.path.join(SOURCE, "python", "mlacheck", "adapters")
MLACHECK = os.environ["MLACHECK_BIN"]


def _value(node, env):
    if isinstance(node, ast.List):
        return [_value(e, env) for e in node.elts]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _value(node.left, env) + _value(node.right, env)
    raise ValueError("not a contract expression: " + ast.dump(node)[:120])


def shipped_contracts():
    """(MODULE.CALLABLE, op, [clauses]) of every @implements in python/mlacheck/adapters/*.py."""
    out = []
    for path in sorted(glob.glob(os.path.join(ADAPTERS, "*.py"))):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        env = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    env[node.targets[0].id] = _value(node.value, env)
                except ValueError:
                    pass
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "implements":
                    keywords = {k.arg: k.value for k in d.keywords}
                    contract = _value(keywords["contract"], env) if "contract" in keywords else []
                    out.append(("%s.%s" % (os.path.basename(path)[:-3], node.name), d.args[0].value, contract))
    return out


def list_with(contracts, tmp_path):
    stub = tmp_path / "shipped_contracts.py"
    lines = ["from mlacheck import implements", ""]
    for name, op, contract in contracts:
        lines += ["@implements(%r, contract=%r)" % (op, contract), "def %s(*args):" % name.replace(".", "__"),
                  "    return None", ""]
    stub.write_text("\n".join(lines))
    args = [MLACHECK, "list"]
    for name, _, _ in contracts:
        args += ["--python", "%s:%s" % (stub, name.replace(".", "__"))]
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"))
    p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=300)
    return p.returncode, p.stdout


def test_every_shipped_adapters_contract_parses(tmp_path):
    contracts = shipped_contracts()
    # Every module's adapters are found (a decorator the reader misses would go unchecked).
    names = {n for n, _, _ in contracts}
    for expected in ("deepgemm.fp8_paged_mqa_logits", "vllm_flashmla.dense_decode_fp8", "vllm_triton.decode_metadata",
                     "vllm_cuda.persistent_topk", "sglang_triton.transform_index_decode"):
        assert expected in names, sorted(names)
    # One Python callable per op in a run: as many runs as the op with the most adapters has.
    rounds = []
    for c in contracts:
        free = next((r for r in rounds if all(op != c[1] for _, op, _ in r)), None)
        if free is None:
            rounds.append([c])
        else:
            free.append(c)
    for i, r in enumerate(rounds):
        (tmp_path / str(i)).mkdir()
        rc, out = list_with(r, tmp_path / str(i))
        assert rc == 0, out[-3000:]


def test_a_clause_the_op_does_not_take_fails(tmp_path):
    contracts = [c for c in shipped_contracts() if c[0] == "vllm_flashmla.dense_decode"]
    assert contracts
    name, op, contract = contracts[0]
    rc, out = list_with([(name, op, contract + ["batch_rows rounding"])], tmp_path)
    assert rc == 2 and "'batch_rows' has no layout terms" in out, out[-3000:]
