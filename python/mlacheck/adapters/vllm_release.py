"""Loads code of one pinned vLLM release from the upstream cache, for the adapters in vllm_triton.py.

Upstream code is driven, never copied: nothing of vLLM's source lives in this repository.
scripts/upstream_cache.sh downloads the release pinned by hash in python/upstream.lock once (its
wheel, with pip) and unpacks its Python files into ~/.cache/mlacheck/upstream/vllm-<version>
($MLACHECK_UPSTREAM_CACHE moves it); the adapters then run vLLM's own functions from those files.

    bash scripts/upstream_cache.sh                      # once
    python3 python/mlacheck/adapters/vllm_release.py    # where the release is, or what to run

$MLACHECK_VLLM_SRC names another unpacked tree (a folder holding vllm/) instead: a copy with a
seeded bug, say (upstream_cache.sh makes one, vllm-<version>-bug). Two ways of loading, both
keeping vLLM's own file name and line numbers (so tracebacks, inspect.getsource and Triton's JIT
read the upstream file itself):

- load_module(rel, shims): a whole module by file path (importlib), with `vllm.*` import shims in
  sys.modules only while it executes. A shim only lets the module import on a machine without
  vLLM installed; each one says what it stands for.
- load_functions(rel, names): chosen top-level functions and class methods of a module whose
  imports pull in half of vLLM (config, distributed, DeepGEMM, ...): their definitions are taken
  from the file's syntax tree and executed, as written, in a namespace holding only the globals
  they use (checked: a name they use that the namespace lacks is an error at load).
"""
import ast
import builtins
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _loading  # noqa: E402 - this folder's loader (_loading.py)

PIN = {"version": "0.29.0"}  # python/upstream.lock pins its wheel by hash

CACHE = os.environ.get("MLACHECK_UPSTREAM_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mlacheck", "upstream")


class MissingRelease(RuntimeError):
    pass


try:  # the mlacheck package (python/), for the adapters' implements(); its effect is two attributes
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from mlacheck import implements  # noqa: F401 - the adapters import it from here
except Exception:  # noqa: BLE001 - a package mid-edit must not stop the adapters
    def implements(op, contract=None):
        def mark(fn):
            fn.mlacheck_op = op
            if contract:
                fn.mlacheck_contract = contract if isinstance(contract, str) else "\n".join(contract)
            return fn
        return mark


def source_root():
    """The unpacked release: $MLACHECK_VLLM_SRC, else the upstream cache's vllm-<version>."""
    env = os.environ.get("MLACHECK_VLLM_SRC")
    if env:
        if not os.path.isdir(os.path.join(env, "vllm")):
            raise MissingRelease("MLACHECK_VLLM_SRC=%s holds no vllm/ folder" % env)
        return os.path.abspath(env)
    root = os.path.join(CACHE, "vllm-" + PIN["version"])
    if not os.path.isfile(os.path.join(root, ".mlacheck-complete")):
        raise MissingRelease("vLLM %s is not in the upstream cache %s: run scripts/upstream_cache.sh"
                             % (PIN["version"], CACHE))
    return root


def upstream_path(rel):
    path = os.path.join(source_root(), rel)
    if not os.path.isfile(path):
        raise MissingRelease("%s is not in the release at %s" % (rel, source_root()))
    return path


def compiled_library(rel, adapter, kernels):
    """The path of one of the release's compiled libraries (rel under the release root), for an
    adapter that drives its CUDA kernels: what is missing, said in one line (mlacheck then stops
    with it, exit 2), when the library is not in the cache or torch sees no GPU. None for a stand-in
    release (a vllm/MLACHECK_STANDIN file): CI's CPU test of an adapter's argument mapping."""
    if os.path.isfile(os.path.join(source_root(), "vllm", "MLACHECK_STANDIN")):
        return None  # a CPU stand-in of the release (tests/upstream/fake_vllm): its Python files compute, no library
    path = os.path.join(source_root(), rel)
    if not os.path.isfile(path):
        raise MissingRelease("%s is not in the upstream cache (bash scripts/upstream_cache.sh --compiled puts it there)"
                             % path)
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("%s drives %s: it needs a GPU (--backend cuda)" % (adapter, kernels))
    return path


shim = _loading.shim


def load_module(rel, shims=()):
    """Executes the release's module rel (a path under the release root) under a private name, with
    the shim modules in sys.modules while it runs (and the previous entries put back after)."""
    path = upstream_path(rel)
    name = "vllm_%s__%s" % (PIN["version"].replace(".", "_"), rel[:-3].replace("/", "__").replace(".", "_"))
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == path:
        return sys.modules[name]
    return _loading.exec_file(path, name, shims)


def _free_names(node):
    """Names a function reads that it neither binds nor takes (its globals), builtins left out."""
    bound, used = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.Name):
            (used if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    for dec in getattr(node, "decorator_list", []):
        for n in ast.walk(dec):
            if isinstance(n, ast.Name):
                used.add(n.id)
    return {u for u in used - bound if not hasattr(builtins, u)}


def load_functions(rel, names, env):
    """The definitions `names` ("fn" or "Class.method") of the release's module rel, executed as
    written in a namespace of env (the globals they use): {name: function}. A method becomes a
    plain function taking self first."""
    path = upstream_path(rel)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    top = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    nodes = []
    for full in names:
        cls, _, fn = full.rpartition(".")
        holder = top.get(cls).body if cls else tree.body
        node = next((n for n in holder if isinstance(n, ast.FunctionDef) and n.name == fn), None) if holder else None
        if node is None:
            raise MissingRelease("%s has no %s" % (path, full))
        nodes.append(node)
    wanted = {n.name for n in nodes}
    missing = set().union(*(_free_names(n) for n in nodes)) - set(env) - wanted
    if missing:
        raise MissingRelease("%s: %s use globals the adapter does not provide: %s"
                             % (path, ", ".join(names), ", ".join(sorted(missing))))
    ns = dict(env)
    ns.update(__name__="vllm_%s__%s" % (PIN["version"].replace(".", "_"), os.path.basename(rel)[:-3]),
              __file__=path, __builtins__=builtins)
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return {full: ns[full.rpartition(".")[2]] for full in names}, ns


if __name__ == "__main__":
    try:
        print("vLLM %s unpacked at %s" % (PIN["version"], source_root()))
    except MissingRelease as e:
        print(e)
        sys.exit(1)
