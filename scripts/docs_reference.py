#!/usr/bin/env python3
"""The flag reference of Tessera's apps, generated from their --help.

Runs each app's --help (CLI11) and writes docs/reference/APP.md: the description, the usage
line, then one section per option group (CLI11's "GROUP:" headers: Options, or Everyday,
Tuning, Testing, ...) with a table of each flag's value, default and meaning. The pages say at
their top that they are generated; edit the flag's help text in the code, then regenerate.

Usage: scripts/docs_reference.py [--check] [--app NAME=BINARY ...] [BUILD_DIR]
  BUILD_DIR        the build folder whose apps/NAME/NAME are run (default <repo>/build)
  --check          write nothing: regenerate in memory and exit 1 naming the app, the flag and
                   the difference when a committed page is not what --help says now
  --app NAME=PATH  the binary of app NAME (instead of BUILD_DIR/apps/NAME/NAME)
  --out DIR        where the pages are (default <repo>/docs/reference)

Python's standard library only. check_docs_commands.py reads the apps' flags through the
parser here (parse_help).
"""

import argparse
import dataclasses
import difflib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APPS = ("tessera-train", "tessera-predict", "tessera-mlp", "tessera-partition", "tessera-convert")
# The guide page that explains each app, linked from its reference page.
GUIDES = {
    "tessera-train": "../guide/training.md",
    "tessera-predict": "../guide/inference.md",
    "tessera-mlp": "../guide/mlp-and-memory.md",
    "tessera-partition": "../guide/partitioning.md",
    "tessera-convert": "../guide/datasets.md",
}
# --data-dir's default is the environment's ($TESSERA_DATA_DIR, else a cache folder): --help
# runs with this stand-in so that the page says where the default comes from, not one machine's.
DATA_DIR_STANDIN = "@TESSERA_DATA_DIR@"
DATA_DIR_TEXT = ("$TESSERA_DATA_DIR, else $XDG_CACHE_HOME/tessera/datasets, "
                 "else ~/.cache/tessera/datasets")
REGENERATE = "/usr/bin/python3 scripts/docs_reference.py BUILD_DIR"


@dataclasses.dataclass
class Option:
    """One option as CLI11 prints it: `NAMES [TYPE[:CHECK][=DEFAULT][ ...][ REQUIRED]]`."""

    names: list  # ["-h", "--help"]
    type: str = ""  # "INT", "TEXT", ...; empty for a switch
    check: str = ""  # "an integer in [1, 2^30]", "{cpu,cuda,auto}", "PATH"
    default: str = ""
    multiple: bool = False  # " ...": takes several values
    required: bool = False
    needs: list = dataclasses.field(default_factory=list)
    excludes: list = dataclasses.field(default_factory=list)
    description: str = ""

    @property
    def takes_value(self):
        return bool(self.type)

    @property
    def choices(self):
        """The allowed values of an enumerated option ({a,b,c}), else None."""
        match = re.fullmatch(r"\{([^{}]*)\}", self.check)
        return match.group(1).split(",") if match else None

    @property
    def flag(self):
        """The long name, or the first one."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


@dataclasses.dataclass
class Help:
    description: str
    usage: str
    groups: list  # [(group name, [Option])]

    def options(self):
        return [option for _, options in self.groups for option in options]

    def find(self, name):
        return next((o for o in self.options() if name in o.names), None)


def _split_outside_brackets(text, separator):
    """`text` split at the first `separator` outside (), [] and {}: (before, after), or
    (text, None) without one."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == separator and depth == 0:
            return text[:i], text[i + 1 :]
    return text, None


def parse_option_head(head):
    """An Option from the text before an option's description, e.g.
    `--split-seed UINT:an integer in [0, 2^64 - 1] Needs: --add-split`."""
    names, _, rest = head.strip().partition(" ")
    option = Option(names=names.split(","))
    for label, field in ((" Excludes:", "excludes"), (" Needs:", "needs")):
        match = re.search(re.escape(label) + r"((?: -{1,2}[\w-]+)+)$", " " + rest)
        if match:
            setattr(option, field, match.group(1).split())
            rest = (" " + rest)[: match.start()].strip()
    rest = re.sub(r" \(Env:[^)]*\)$", "", " " + rest).strip()
    if rest.endswith(" REQUIRED") or rest == "REQUIRED":
        option.required = True
        rest = rest[: -len("REQUIRED")].strip()
    if rest.endswith(" ..."):
        option.multiple = True
        rest = rest[:-4].strip()
    elif re.search(r" x \d+$", rest):
        option.multiple = True
        rest = re.sub(r" x \d+$", "", rest)
    if rest:
        kind, default = _split_outside_brackets(rest, "=")
        option.default = default if default is not None else ""
        option.type, _, option.check = kind.partition(":")
    return option


def parse_help(text):
    """The description, usage and option groups of CLI11's --help output.

    CLI11 prints the description, "Usage: PROGRAM [OPTIONS]", then per group a line "GROUP:"
    and its options, each `  NAMES TYPE...` padded to a column with the description after it,
    or (a long head) the description on the next line at that column; a description's own line
    breaks continue at the same column."""
    lines = text.splitlines()
    usage_at = next(i for i, line in enumerate(lines) if line.startswith("Usage:"))
    description = " ".join(line.strip() for line in lines[:usage_at] if line.strip())
    # The description column: where continuation lines start (CLI11's default is 30).
    indents = [len(l) - len(l.lstrip()) for l in lines[usage_at + 1 :]
               if l.startswith("   ") and not l.lstrip().startswith("-")]
    column = min(indents) if indents else 30
    def continues(i):  # whether line i is a description line at the column
        return i < len(lines) and lines[i].startswith(" " * column) and lines[i][column] != " "

    groups, option = [], None
    for i, line in enumerate(lines[usage_at + 1 :], start=usage_at + 1):
        if not line.strip():
            continue
        if not line[0].isspace() and line.rstrip().endswith(":"):
            groups.append((line.rstrip()[:-1], []))
            option = None
        elif line.lstrip().startswith("-") and len(line) - len(line.lstrip()) < column:
            if not groups:
                raise ValueError(f"option line before any group header: {line!r}")
            # The description follows on this line after padding (two spaces or more, or one
            # when no description line follows), or a head too long for the column stands
            # alone and the description starts on the next line.
            same_line = (len(line) > column and line[column - 1] == " " and line[column] != " "
                         and (line[column - 2] == " " or not continues(i + 1)))
            head, desc = (line[:column], line[column:]) if same_line else (line, "")
            option = parse_option_head(head)
            option.description = desc.strip()
            groups[-1][1].append(option)
        elif option is not None and line.startswith(" " * column):
            option.description = (option.description + " " + line.strip()).strip()
        else:
            raise ValueError(f"unexpected line in --help: {line!r}")
    usage = lines[usage_at].split(None, 2)
    return Help(description, usage, groups)


def run_help(binary):
    """The --help text of `binary`, run with a stand-in for the data folder's default."""
    env = dict(os.environ, TESSERA_DATA_DIR=DATA_DIR_STANDIN)
    for attempt in range(3):  # a rebuild may replace the binary for a moment
        try:
            result = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                                    env=env, timeout=60)
        except OSError as error:
            if attempt == 2:
                raise SystemExit(f"error: cannot run {binary} --help: {error}")
            time.sleep(2)
            continue
        if result.returncode == 0:
            return result.stdout
        if attempt == 2:
            raise SystemExit(f"error: {binary} --help exited {result.returncode}: "
                             f"{result.stderr.strip()}")
        time.sleep(2)
    raise AssertionError("unreachable")


def _cell(text):
    """Table-cell text: pipes escaped, the data folder's stand-in spelled out."""
    return text.replace(DATA_DIR_STANDIN, DATA_DIR_TEXT).replace("|", "\\|")


def _code(text):
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def value_cell(option):
    if not option.takes_value:
        return "switch"
    if option.choices:
        text = "one of " + ", ".join(_code(c) for c in option.choices)
    elif option.check == "PATH":  # add_path_option's check: not an empty string
        text = f"{_code(option.type)}: not empty"
    elif option.check:
        text = f"{_code(option.type)}: {_cell(option.check)}"
    else:
        text = _code(option.type)
    if option.multiple:
        text += " (one or more)"
    if option.required:
        text += "; **required**"
    return text


def default_cell(option):
    if option.default == DATA_DIR_STANDIN:
        return ", else ".join(_code(part) for part in DATA_DIR_TEXT.split(", else "))
    return _code(option.default)


def option_row(option):
    meaning = _cell(option.description)
    if option.needs:
        meaning += " (needs " + ", ".join(_code(n) for n in option.needs) + ")"
    if option.excludes:
        meaning += " (not with " + ", ".join(_code(n) for n in option.excludes) + ")"
    names = ", ".join(_code(n) for n in option.names)
    return f"| {names} | {value_cell(option)} | {default_cell(option)} | {meaning} |"


def render_page(app, help):
    """The reference page of `app` from its parsed --help."""
    out = [f"<!-- Generated from `{app} --help` by scripts/docs_reference.py: do not edit; "
           f"change the help text in the code and run `{REGENERATE}`. -->",
           f"# {app}", "", _cell(help.description), "", "```text",
           " ".join(["Usage:", app] + help.usage[2:]), "```", ""]
    if app in GUIDES:
        out += [f"How to use it: [the guide]({GUIDES[app]}). All apps: [the reference](README.md).",
                ""]
    for group, options in help.groups:
        out += [f"## {group}", "", "| flag | value | default | meaning |", "|---|---|---|---|"]
        out += [option_row(option) for option in options]
        out.append("")
    return "\n".join(out)


def app_binary(app, build_dir, overrides):
    return Path(overrides.get(app) or Path(build_dir) / "apps" / app / app)


def page_rows(text):
    """{flag cell: (group, row)} of a page's tables, and its other lines in order."""
    rows, others, group = {}, [], ""
    for line in text.splitlines():
        if line.startswith("## "):
            group = line[3:]
        if line.startswith("| `-"):
            rows[line.split(" | ")[0][2:].replace("`", "")] = (group, line)
        else:
            others.append(line)
    return rows, others


def describe_difference(app, page, committed, wanted):
    """Lines that name each flag whose row differs between the committed page and --help."""
    have, have_other = page_rows(committed)
    want, want_other = page_rows(wanted)
    problems, moved = [], {}
    for flag in want:
        if flag not in have:
            problems.append(f"{app} {flag}: in --help, not on {page}")
            continue
        if have[flag][0] != want[flag][0]:
            moved.setdefault((have[flag][0], want[flag][0]), []).append(flag)
        if have[flag][1] != want[flag][1]:
            problems.append(f"{app} {flag}: {page} says\n      {have[flag][1]}\n"
                            f"    --help says\n      {want[flag][1]}")
    for (was, now), flags in moved.items():
        problems.append(f"{app} {', '.join(flags)}: under '{was}' on {page}, under '{now}' in "
                        f"--help")
    for flag in have:
        if flag not in want:
            problems.append(f"{app} {flag}: on {page}, no longer in --help")
    if have_other != want_other:
        diff = difflib.unified_diff(have_other, want_other, page, f"{app} --help", n=0,
                                    lineterm="")
        problems.append(f"{app}: the text around the tables differs:\n    " +
                        "\n    ".join(list(diff)[:20]))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", nargs="?", default=str(REPO / "build"))
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--app", action="append", default=[], metavar="NAME=BINARY")
    parser.add_argument("--out", default=str(REPO / "docs" / "reference"))
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.app)
    out = Path(args.out)

    stale = []
    for app in APPS:
        binary = app_binary(app, args.build_dir, overrides)
        if not binary.is_file():
            raise SystemExit(f"error: {binary} not found: build {app} first, or name the build "
                             f"folder (scripts/docs_reference.py BUILD_DIR)")
        wanted = render_page(app, parse_help(run_help(binary)))
        path = out / f"{app}.md"
        try:
            page = str(path.relative_to(REPO))
        except ValueError:
            page = str(path)
        if not args.check:
            if not path.is_file() or path.read_text() != wanted:
                path.write_text(wanted)
                print(f"wrote {page}")
            continue
        if not path.is_file():
            stale.append(f"{app}: {page} does not exist")
        elif path.read_text() != wanted:
            stale += describe_difference(app, page, path.read_text(), wanted)
        else:
            print(f"{page}: current ({app} --help)")
    index = out / "README.md"
    missing = [app for app in APPS
               if index.is_file() and f"({app}.md)" not in index.read_text()]
    if missing:
        stale.append(f"{index}: no link to " + ", ".join(f"{app}.md" for app in missing))
    if stale:
        print("error: the flag reference is stale:\n  " + "\n  ".join(stale), file=sys.stderr)
        print(f"Regenerate it: {REGENERATE} (the folder the apps were built in, e.g. build), "
              f"and commit docs/reference/.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
