"""Every #include between layers runs one way: a layer uses only the layers listed before it in
docs/design.md's "Layers" (core, oracle, kernels, harness, properties, fuzz, ... tools). Reads that
list from the doc itself, so the order has one home. Prints one line per include that runs from a
layer to one after it, and exits 1; else one line counting what it read, exit 0.

    python3 tests/layers/check_layers.py SOURCE_DIR
"""
import os
import re
import sys

SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".in")


def layer_order(design_md):
    """The folders of the numbered list under '## Layers', in order."""
    order, inside = [], False
    for line in open(design_md, encoding="utf-8"):
        if line.startswith("## "):
            inside = line.strip() == "## Layers"
            continue
        m = re.match(r"^\d+\. \*\*([a-z_]+(?:/[a-z_]+)?)/\*\*", line)
        if inside and m:
            order.append(m.group(1))
    return order


def main(root):
    design = os.path.join(root, "docs", "design.md")
    def has_sources(layer):
        return any(n.endswith(SOURCES) for _, _, names in os.walk(os.path.join(root, layer)) for n in names)
    # The folders with code; tests/ is left out (a test may include any layer it tests).
    order = [l for l in layer_order(design) if l != "tests" and has_sources(l)]
    if len(order) < 5:
        print("check_layers: docs/design.md's Layers list gave %s, not the layers" % order)
        return 2
    rank = {l: i for i, l in enumerate(order)}
    files = across = 0
    wrong = []
    for layer in order:
        for top, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(top, name)
                files += 1
                for n, text in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', text)
                    if not m or m.group(1) not in rank or m.group(1) == layer:
                        continue
                    across += 1
                    if rank[m.group(1)] > rank[layer]:
                        wrong.append("%s:%d includes %s: %s may use %s (docs/design.md, Layers)" % (
                            os.path.relpath(path, root), n, text.split('"')[1], layer,
                            ", ".join(order[:rank[layer]]) or "no other layer"))
    for w in wrong:
        print(w)
    if wrong:
        return 1
    print("check_layers: %d files of %d layers (%s), %d includes across layers, each to a layer before its own"
          % (files, len(order), " < ".join(order), across))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: check_layers.py SOURCE_DIR")
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
