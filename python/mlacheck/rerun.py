"""python -m mlacheck.rerun FILE [--import MODULE_OR_FILE]...: reruns a call mlacheck.guard() saved,
alone, under the guard (python/mlacheck/guard.py; `mlacheck repro FILE --python MODULE` runs this).
Exit 0 clean, 1 the finding again, 2 the file or the op could not be loaded."""
import sys

from mlacheck.guard import _main

if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
