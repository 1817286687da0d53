"""`sparq bench`'s text output, for the summarize scripts beside this file:
one dict a result line, keyed by the header line's column names ('#'
lines are its preamble)."""
import pathlib


def rows(path):
    lines = [line.split() for line in pathlib.Path(path).read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return [dict(zip(lines[0], line)) for line in lines[1:]]
