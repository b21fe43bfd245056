"""How the adapters load a released module: by file path, under a private name, with stand-in
modules ("shims") for the imports it makes, in sys.modules only while it executes. vllm_release.py
and sglang_triton.py load their releases so; nothing else of the release is imported."""
import contextlib
import importlib.util
import sys
import types


def shim(name, **attrs):
    """A stand-in module `name` holding attrs."""
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    m.__mlacheck_shim__ = True
    return m


@contextlib.contextmanager
def shims_in_place(shims):
    """The shim modules in sys.modules under their names while the block runs, the previous entries
    put back after."""
    saved = {m.__name__: sys.modules.get(m.__name__) for m in shims}
    sys.modules.update({m.__name__: m for m in shims})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def exec_file(path, name, shims=()):
    """The module at path executed as sys.modules[name], with the shims in place while it runs."""
    with shims_in_place(shims):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module
