"""Exit 0 when every module named on the command line is installed, 1 when one is not.

The tests' "skipped: no torch" probe. It finds the modules without importing them: importing torch
costs about 2 s of CPU, and the probe ran in every Python test's process (64 times in the sanitizer
suite alone). An installed module that fails on import is then the test's failure, not a skip.

    python tests/tools/has_modules.py torch triton
"""
import importlib.util
import sys

sys.exit(any(importlib.util.find_spec(name) is None for name in sys.argv[1:]))
