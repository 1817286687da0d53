"""torch's Gloo (inside libtorch_cpu) and sparq's (Debian's libgloo) in one
process: every Gloo symbol that _sparq or libgloo uses binds to libgloo, and
every one that libtorch uses binds to libtorch, with torch loaded as usual
and with TORCH_USE_RTLD_GLOBAL=1 (its symbols global). Read from the dynamic
linker's own log (LD_DEBUG=bindings).
    gloo_isolation_test.py   (with the environment's python)
"""
import os
import re
import subprocess
import sys
import tempfile

BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `(_ZN4gloo\S*)'")


def bindings(extra_env):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(d, "ld"), **extra_env)
        subprocess.run([sys.executable, "-c", "import torch, sparq"], env=env, check=True)
        found = []
        for name in os.listdir(d):
            with open(os.path.join(d, name), errors="replace") as f:
                found += BINDING.findall(f.read())
        return found


def side(path):
    base = os.path.basename(path)
    if base.startswith("_sparq") or base.startswith("libgloo"):
        return "sparq"
    if base.startswith("libtorch"):
        return "torch"
    return None


def main():
    failures = []
    for extra in ({}, {"TORCH_USE_RTLD_GLOBAL": "1"}):
        seen = {"sparq": 0, "torch": 0}
        for src, dst, sym in bindings(extra):
            s = side(src)
            if s is None:
                continue
            seen[s] += 1
            if side(dst) != s:
                failures.append(f"{extra or 'default'}: {os.path.basename(src)} binds {sym} to {dst}")
        if seen["sparq"] == 0:
            failures.append(f"{extra or 'default'}: no Gloo binding of _sparq or libgloo in the log")
        print(f"{extra or 'default'}: {seen['sparq']} Gloo bindings of sparq's side, {seen['torch']} of torch's")
    for f in failures[:20]:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
