#!/usr/bin/env python3
"""The README's examples run as written.

    readme_test.py REPO

Runs every ```sh block of the README's "Use it" section, in order, each in a
fresh bash (-e, -o pipefail) from the repository's root, as a user would
paste it after `scripts/setup`; a block that brings up `scripts/cluster` is
skipped, with the reason, where network namespaces cannot be made (not root,
no `ip`). The ```python snippets cannot run alone (they show a call inside
a user's model), so their `st.NAME` / `sq.NAME` / `sparq.NAME` calls are
checked to exist in sparq.torch / sparq.torchrec / sparq. Exits 1 at the
first failure, naming the README's line.
"""
import os
import re
import subprocess
import sys

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def use_it(readme):
    """(first line number, language, text) of each fenced block of "## Use it"."""
    start = readme.index("\n## Use it\n")
    end = readme.index("\n## ", start + 1)
    section = readme[start:end]
    for m in BLOCK.finditer(section):
        yield readme[:start + m.start()].count("\n") + 2, m[1], m[2]


def can_make_netns():
    probe = "sqrd_probe"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0 if os.geteuid() == 0 \
        else False
    if ok:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ok


def check_names(repo, code, line):
    names = sorted(set(re.findall(r"\b(st|sq|sparq)\.([a-zA-Z_]\w*)", code)))
    probe = "import sparq, sparq.torch as st, sparq.torchrec as sq\n" + "".join(
        f"assert hasattr({mod}, {name!r}), '{mod}.{name}'\n" for mod, name in names)
    r = subprocess.run([os.path.join(repo, ".venv/bin/python"), "-c", probe], capture_output=True, text=True, cwd=repo)
    if r.returncode:
        sys.exit(f"README.md:{line}: the snippet calls what sparq does not have: {r.stderr.strip().splitlines()[-1]}")
    print(f"ok   README.md:{line}: python snippet ({', '.join(m + '.' + n for m, n in names)} exist)")


def main():
    repo = os.path.abspath(sys.argv[1])
    with open(os.path.join(repo, "README.md")) as f:
        readme = f.read()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               CLUSTER_PREFIX="sqrd", CLUSTER_NET="10.250.78")  # a cluster of the user's stays untouched
    netns = None
    ran = 0
    for line, lang, code in use_it(readme):
        if lang == "python":
            check_names(repo, code, line)
            continue
        if lang != "sh":
            continue
        if "scripts/cluster up" in code:
            netns = can_make_netns() if netns is None else netns
            if not netns:
                print(f"skip README.md:{line}: scripts/cluster needs root and network namespaces")
                continue
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=repo, env=env, capture_output=True,
                           text=True, timeout=600)
        if r.returncode:
            if "scripts/cluster up" in code:
                subprocess.run([os.path.join(repo, "scripts/cluster"), "down"], env=env, capture_output=True)
            sys.exit(f"README.md:{line}: exit {r.returncode}\n{code}\n--- stdout\n{r.stdout[-3000:]}\n"
                     f"--- stderr\n{r.stderr[-3000:]}")
        ran += 1
        print(f"ok   README.md:{line}: {code.splitlines()[0][:90]}")
    if ran == 0:
        sys.exit("README.md: no ```sh block in \"## Use it\"")


if __name__ == "__main__":
    main()
