#!/usr/bin/env python3
"""docs/cli.md against the CLI's own --help, so that the two cannot drift.

    cli_doc_test.py SPARQ docs/cli.md

Every subcommand of `sparq --help` and `sparq bench --help` has a section
whose heading names it (`sparq train`, `sparq bench allreduce`; a bench
section also takes the text `sparq bench` has before its first subsection).
Each flag its --help lists appears in that section; each flag in the first
cell of a table row there is one of that command's; and every other flag on
the page is one of some sparq command or of a launcher the page shows
(mpiexec, torchrun). Prints every mismatch and exits 1 if there is one.
"""
import re
import subprocess
import sys

FLAG = re.compile(r"--[a-z][a-z0-9-]*")
OPTION_LINE = re.compile(r"^  (?:-[a-zA-Z],)?(--[a-z][a-z0-9-]*(?:,--[a-z][a-z0-9-]*)*)")
LAUNCHERS = {"--oversubscribe", "--bind-to", "--mca", "--allow-run-as-root", "--nproc-per-node", "--standalone",
             "--host", "--hostfile"}


def help_text(sparq, *cmd):
    return subprocess.run([sparq, *cmd, "--help"], check=True, capture_output=True, text=True).stdout


def subcommands(text):
    """The names under 'Subcommands:' of a --help."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            names.append(line.split()[0])
        elif inside and line.strip():
            inside = False
    return names


def flags(text):
    """[[name, alias...], ...] of a --help's options, --help left out."""
    out = []
    for line in text.splitlines():
        m = OPTION_LINE.match(line)
        if m and m[1] != "--help":
            out.append(m[1].split(","))
    return out


def sections(doc):
    """{command: text} for every heading that names `sparq COMMAND`; a
    heading's text runs to the next heading of its level or above."""
    lines = doc.splitlines()
    heads = [(i, len(line) - len(line.lstrip("#"))) for i, line in enumerate(lines) if re.match(r"#+ ", line)]
    out = {}
    for k, (i, level) in enumerate(heads):
        end = next((j for j, lv in heads[k + 1:] if lv <= level), len(lines))
        own_end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        for cmd in re.findall(r"`sparq ([a-z -]+?)`", lines[i]):
            out[cmd] = ("\n".join(lines[i:end]), "\n".join(lines[i:own_end]))
    return out


def main():
    sparq, path = sys.argv[1:3]
    with open(path) as f:
        doc = f.read()
    cmds = [c for c in subcommands(help_text(sparq)) if c != "bench"]
    cmds += [f"bench {c}" for c in subcommands(help_text(sparq, "bench"))]
    secs = sections(doc)
    errors, known = [], set(LAUNCHERS) | {"--help"}
    helps = {c: flags(help_text(sparq, *c.split())) for c in cmds}
    for options in helps.values():
        for names in options:
            known.update(names)
    for cmd in cmds:
        if cmd not in secs:
            errors.append(f"{path}: no section names `sparq {cmd}`")
            continue
        text = secs[cmd][0] + ("\n" + secs["bench"][1] if cmd.startswith("bench ") and "bench" in secs else "")
        for names in helps[cmd]:
            if not any(re.search(re.escape(n) + r"(?![a-z0-9-])", text) for n in names):
                errors.append(f"{path}: `sparq {cmd}` has {names[0]}, which its section does not mention")
    for cmd, (text, _) in secs.items():
        # a table's first cell documents flags of the section's own command(s)
        own = {n for c in cmds if c == cmd or (c.startswith(cmd + " ") and cmd == "bench")
               for names in helps.get(c, []) for n in names}
        head = text.splitlines()[0]
        own |= {n for c in re.findall(r"`sparq ([a-z -]+?)`", head) for names in helps.get(c, []) for n in names}
        for line in text.splitlines():
            if line.startswith("| `-"):
                for f in FLAG.findall(line.split("|")[1]):
                    if f not in own:
                        errors.append(f"{path}: the table of `sparq {cmd}` documents {f}, which it does not have")
    for n, line in enumerate(doc.splitlines(), 1):
        for f in FLAG.findall(line):
            if f not in known and not (f.endswith("-") and any(k.startswith(f) for k in known)):  # `--arch-*`
                errors.append(f"{path}:{n}: {f} is no flag of sparq's (nor of mpiexec or torchrun)")
    for e in dict.fromkeys(errors):
        print(e)
    print(f"{len(cmds)} commands, {sum(len(v) for v in helps.values())} flags checked: "
          f"{'FAIL' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
