#!/usr/bin/env python3
"""Every command in README.md and docs/ as written: its flags checked, and the tour run.

Reads the fenced ```bash, ```sh and ```console blocks of README.md and docs/**/*.md (a
console block's commands are its "$ " lines), joins lines continued with a backslash, drops
comments, splits at ; && || | and finds in each simple command a Tessera program, also after
environment assignments and launchers (mpirun -np 4 ..., python3 ..., time ...):
  - an app (tessera-train, -mlp, -partition, -convert; the examples and benchmarks with a
    CLI11 --help), by any path: a build/... path must be where the build puts it, every flag
    must be one its --help lists, with a value where it takes one, and a value of an
    enumerated flag ({cpu,cuda,auto}), a BOOLEAN or a number must be one it accepts;
  - a repository script (scripts/*.sh, scripts/bench/*.sh, scripts/*.py): it must exist, and
    its flags and words must be ones its own --help (usage) names, the sections its
    `sections=(...)` names, or, where the usage passes flags on (TESSERA_TRAIN_FLAGS),
    tessera-train's.
Inline code spans of the prose that start with one of those programs (`tessera-partition
--compare`) are checked the same way, reading `a|b` as alternatives and `[...]`, `...` and
UPPER-CASE words as the placeholders of a synopsis.

Then it runs the README's tour (the fenced block under "A five-minute tour") as written, in a
temporary folder that links the repository's top-level entries (build: the build folder), with
TESSERA_DATA_DIR pointed at the data folder instead of what the tour exports, the Open MPI
settings of scripts/common.sh (root, containers) and oversubscription allowed. Commands that
need a GPU (--device cuda), Slurm (srun, sbatch) or the internet (scripts/fetch_datasets.sh,
pip, wget, ...) are flag-checked only, with a line saying so. A dataset file the tour takes as
the reader's own (snap:my_edges.txt) is written first, a small edge list.

Usage: scripts/check_docs_commands.py [--build-dir DIR] [--data-dir DIR] [--no-run] [--verbose]
  --build-dir DIR  the build folder with the apps (default <repo>/build)
  --data-dir DIR   the datasets for the tour (default $TESSERA_DATA_DIR, else
                   <repo>/../shared/datasets)
  --no-run         check flags only; do not run the tour
  --verbose        print every command checked, not only the bad ones
Exit status: 1 when a command is wrong (each named as FILE:LINE) or a tour command fails; 77
(a skip to ctest) when the flags are right but the tour could not run for want of the data.
Python's standard library only.
"""

import argparse
import dataclasses
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
import docs_reference  # noqa: E402  the apps' --help parser

REPO = docs_reference.REPO
SHELL_BLOCKS = ("bash", "sh", "shell", "console")
# Words that start another program: the Tessera program is the first one after them.
LAUNCHERS = {"mpirun", "mpiexec", "srun", "salloc", "time", "env", "nohup", "timeout", "nice",
             "python3", "python", "bash", "sh", "exec", "xargs"}
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "|&", ";;"}
REDIRECTIONS = {">", ">>", "<", ">&", "&>", "<&", ">|", "&>>", "<<", "<<<"}
BOOLEANS = {"true", "false", "1", "0", "yes", "no", "on", "off"}
INTERNET = re.compile(r"(^|/)(fetch_datasets\.sh|wget|curl|pip3?|apt-get|apt|git)$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SKIPPED = 77  # the exit status ctest reads as a skip (SKIP_RETURN_CODE)
TOUR_HEADING = re.compile(r"^#+\s+.*five-minute tour", re.IGNORECASE)


@dataclasses.dataclass
class Command:
    """One simple command of a doc: where it stands and its words."""

    file: str
    line: int
    words: list
    text: str  # as written, continuation lines joined
    inline: bool = False  # an inline code span of the prose, read as a synopsis

    @property
    def where(self):
        return f"{self.file}:{self.line}"


# ---- reading the docs ---------------------------------------------------------------------------


def markdown_files():
    return [REPO / "README.md"] + sorted(Path(p) for p in glob.glob(
        str(REPO / "docs" / "**" / "*.md"), recursive=True))


def relative(path):
    return str(Path(path).relative_to(REPO))


def fenced_blocks(path):
    """(language, [(line number, text)]) of every fenced block of a Markdown file."""
    blocks, current, fence = [], None, None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if current is None:
            match = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, current = match.group(1), (match.group(2).lower(), [])
        elif stripped.startswith(fence):
            blocks.append(current)
            current = None
        else:
            current[1].append((number, line))
    return blocks


def logical_lines(lines, console):
    """(first line number, text) of each command line, backslash continuations joined."""
    out, pending, start = [], "", 0
    for number, line in lines:
        if not pending:
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            start = number
        if pending:
            line = line.lstrip()
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def split_simple(words):
    """A tokenized line split into simple commands: at ; && || | & ( ), redirections dropped,
    and an mpirun line of several programs (A : B) split into one per program."""
    commands, current, i = [], [], 0
    while i < len(words):
        word = words[i]
        i += 1
        if word in SEPARATORS:
            commands.append(current)
            current = []
        elif word in REDIRECTIONS:
            if current and current[-1] in ("0", "1", "2"):
                current.pop()  # the descriptor of 2>&1, split from its operator
            i += 1  # the target
        else:
            current.append(word)
    commands.append(current)
    out = []
    for command in commands:
        if command and os.path.basename(command[0]) in ("mpirun", "mpiexec") and ":" in command:
            piece = []
            for word in command:
                if word == ":":
                    out.append(piece)
                    piece = [command[0]]
                else:
                    piece.append(word)
            out.append(piece)
        elif command:
            out.append(command)
    return out


def block_commands(path, language, lines):
    commands = []
    for start, text in logical_lines(lines, language == "console"):
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError as error:
            commands.append(Command(relative(path), start, [], f"unparsable: {error}"))
            continue
        for words in split_simple(words):
            commands.append(Command(relative(path), start, words, text.strip()))
    return commands


def inline_spans(path):
    """(line number, text) of the inline code spans outside fenced blocks (a span may run over
    a line break)."""
    text = path.read_text()
    prose = text
    for match in re.finditer(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", text, re.MULTILINE | re.DOTALL):
        blank = re.sub(r"[^\n]", " ", match.group(0))
        prose = prose[: match.start()] + blank + prose[match.end():]
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose):
        yield text.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split())


def inline_commands(path):
    commands = []
    for line, span in inline_spans(path):
        if span[:1] in ("'", '"'):
            continue  # a quoted string (`"tessera-run-report"`), not a command
        try:
            words = shlex.split(span)
        except ValueError:
            words = span.split()
        if program_index(words) is None:
            continue
        # A span is a synopsis: " | " is a pipe, [optional] words are words, a|b alternatives.
        words = [w if w in SEPARATORS else w.strip("[]") for w in words]
        words = [w for w in words if w and w not in ("&", "(", ")")]
        commands += [Command(relative(path), line, piece, span, inline=True)
                     for piece in split_simple(words)]
    return commands


def all_commands():
    commands = []
    for path in markdown_files():
        for language, lines in fenced_blocks(path):
            if language in SHELL_BLOCKS:
                commands += block_commands(path, language, lines)
        commands += inline_commands(path)
    return commands


# ---- which program a command runs -----------------------------------------------------------


def script_of(word):
    """The repository script a word names (scripts/x.sh by any path, or a bare name of a file
    under scripts/, as prose writes `plot.py`), relative to the repository, or None."""
    match = re.search(r"(^|/)(scripts/\S+\.(sh|py))$", word)
    if match:
        return match.group(2)
    if re.fullmatch(r"[\w-]+\.(sh|py)", word):
        found = sorted(REPO.glob(f"scripts/**/{word}"))
        if len(found) == 1:
            return relative(found[0])
    return None


def is_program(word):
    return os.path.basename(word).startswith("tessera-") or script_of(word) is not None


def program_index(words):
    """Index of the Tessera program (an app or a repository script) a command runs, or None."""
    i = 0
    while i < len(words) and ASSIGNMENT.match(words[i]):
        i += 1
    if i == len(words):
        return None
    if is_program(words[i]):
        return i
    if os.path.basename(words[i]) in LAUNCHERS:
        return next((j for j in range(i + 1, len(words)) if is_program(words[j])), None)
    return None


def repo_path(word):
    """The repository-relative path of a word naming a file in it ($PWD/x, ./x, x)."""
    for prefix in ("$PWD/", "${PWD}/", "./"):
        if word.startswith(prefix):
            word = word[len(prefix):]
    return word


class Programs:
    """What the built apps and the repository's scripts accept, read once each."""

    def __init__(self, build_dir):
        self.build_dir = Path(build_dir)
        self.helps = {}
        self.scripts = {}

    def binary(self, name):
        for pattern in (f"apps/{name}/{name}", f"apps/examples/*/{name}", f"bench/{name}"):
            found = sorted(self.build_dir.glob(pattern))
            if found:
                return found[0]
        return None

    def app_help(self, name):
        """The parsed --help of app `name`; None when it is not built or not CLI11's."""
        if name not in self.helps:
            binary = self.binary(name)
            help = None
            if binary is not None:
                text = docs_reference.run_help(binary)
                try:
                    help = docs_reference.parse_help(text)
                except (ValueError, StopIteration):
                    help = self.flag_list(text)
            self.helps[name] = help
        return self.helps[name]

    @staticmethod
    def targets():
        """The programs the source tree builds (add_executable of apps/ and bench/)."""
        names = set()
        cmakes = list(REPO.glob("apps/**/CMakeLists.txt")) + [REPO / "bench" / "CMakeLists.txt"]
        for cmake in cmakes:
            if cmake.is_file():
                names |= set(re.findall(r"add_executable\((tessera-[\w-]+)", cmake.read_text()))
        return names

    @staticmethod
    def installed():
        """The programs the CMake files install (install(TARGETS ...) naming them)."""
        names = set()
        for cmake in list(REPO.glob("**/CMakeLists.txt")) + list(REPO.glob("cmake/*.cmake")):
            if "build" in cmake.relative_to(REPO).parts[:1]:
                continue
            for call in re.findall(r"install\s*\(\s*TARGETS([^)]*)\)", cmake.read_text()):
                names |= set(re.findall(r"tessera-[\w-]+", call))
        return names

    @staticmethod
    def flag_list(text):
        """The flags of a help that is not CLI11's (Google Benchmark's "[--name=<value>]"
        synopsis), as a Help of untyped options; None when it names none."""
        options = [docs_reference.Option([name], type="TEXT" if value else "")
                   for name, value in re.findall(r"\[(--?[\w-]+)(=?)", text)]
        return docs_reference.Help("", [], [("Options", options)]) if options else None

    def script(self, path):
        if path not in self.scripts:
            self.scripts[path] = ScriptUsage.of(REPO / path)
        return self.scripts[path]


# ---- checking an app's flags ----------------------------------------------------------------


def looks_like_flag(word):
    return word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-[\d.]+(e-?\d+)?", word)


def is_placeholder(value, inline):
    """A value the doc leaves to the reader: a shell expansion, or in a synopsis an UPPER-CASE
    word or an elision."""
    if "$" in value or "`" in value:
        return True
    return inline and ("..." in value or "…" in value or re.fullmatch(r"[A-Z][A-Z0-9_]*", value)
                       is not None)


def value_problem(option, value, inline):
    """What is wrong with `value` for `option`, or None."""
    alternatives = value.split("|") if inline else [value]
    for v in alternatives:
        if is_placeholder(v, inline):
            continue
        if option.choices and v not in option.choices:
            return f"{option.flag} {v}: expects one of {', '.join(option.choices)}"
        if option.type == "BOOLEAN" and v.lower() not in BOOLEANS:
            return f"{option.flag} {v}: expects true or false"
        if option.type in ("INT", "UINT") and not re.fullmatch(r"-?\d+", v):
            return f"{option.flag} {v}: expects an integer"
        if option.type == "FLOAT" and not re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", v):
            return f"{option.flag} {v}: expects a number"
    return None


def suggestion(name, names):
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def check_app_flag(program, help, args, i, inline):
    """Problems with the flag args[i] of app `program` and its values; the index after them."""
    word = args[i]
    i += 1
    name, has_value, value = word.partition("=")
    option = help.find(name)
    if option is None:  # its value, if one follows, goes with it
        names = [n for o in help.options() for n in o.names]
        if not has_value and i < len(args) and not looks_like_flag(args[i]):
            i += 1
        return [f"{program} has no flag {name}{suggestion(name, names)}"], i
    if not option.takes_value:
        return [], i
    problems, values = [], [value] if has_value else []
    if not has_value:
        if i < len(args) and not looks_like_flag(args[i]):
            values.append(args[i])
            i += 1
        elif not inline:  # a synopsis may name a flag alone: `tessera-partition --out`
            problems.append(f"{program} {name} needs a value ({option.type})")
    while option.multiple and i < len(args) and not looks_like_flag(args[i]):
        values.append(args[i])
        i += 1
    for v in values:
        problem = value_problem(option, v, inline)
        if problem:
            problems.append(f"{program} {problem}")
    return problems, i


def check_app_args(program, help, args, inline):
    """Problems with the arguments `args` of app `program` whose --help is `help`."""
    problems, i = [], 0
    while i < len(args):
        word = args[i]
        if inline and (word in ("...", "…") or is_placeholder(word, True)):
            i += 1
        elif looks_like_flag(word):
            found, i = check_app_flag(program, help, args, i, inline)
            problems += found
        else:
            problems.append(f"{program} takes no argument '{word}' here (a value of a switch, or "
                            f"a word without its flag?)")
            i += 1
    return problems


def check_app(command, index, programs):
    word = command.words[index]
    name = os.path.basename(word)
    binary = programs.binary(name)
    if binary is None:
        if name in docs_reference.APPS:
            return [f"{name} is not in {programs.build_dir} (build it first)"], None
        if name in programs.targets():  # a benchmark or example this build leaves out
            return [], f"{name} is not built in {programs.build_dir}: not checked"
        return [f"no program {name} in the source tree (apps, examples, bench)"], None
    problems = []
    path = repo_path(word)
    if "/" not in word and not command.inline and name not in programs.installed():
        problems.append(f"{name} is not installed by `cmake --install` (nothing puts it on PATH): "
                        f"write build/{binary.relative_to(programs.build_dir)}")
    if path.startswith("build/"):
        expected = "build/" + str(binary.relative_to(programs.build_dir))
        if path != expected:
            problems.append(f"{word}: the build puts {name} at {expected}")
    help = programs.app_help(name)
    if help is None:
        return problems, "its --help names no flags: not checked"
    return problems + check_app_args(name, help, command.words[index + 1:], command.inline), None


# ---- checking a script's flags --------------------------------------------------------------


@dataclasses.dataclass
class ScriptUsage:
    """What a script's usage (its --help) says it accepts."""

    path: Path
    flags: dict  # flag -> whether it takes a value
    pass_train_flags: bool = False  # TESSERA_TRAIN_FLAGS: other flags go to tessera-train
    pass_anything: bool = False  # CTEST_ARGS and the like: anything after the flags
    after_double_dash: bool = False  # [-- FLAGS...]: anything after --
    words: object = None  # None: no positional words; a set: those; "any": any
    subcommands: object = None  # {name: ScriptUsage} of an argparse program with subcommands
    error: str = ""

    @staticmethod
    def help_text(path, extra=()):
        runner = ["bash"] if path.suffix == ".sh" else ["/usr/bin/python3"]
        result = subprocess.run(runner + [str(path), *extra, "--help"], capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        return result.returncode, result.stdout + result.stderr

    @classmethod
    def of(cls, path, extra=()):
        if not path.is_file():
            return cls(path, {}, error=f"{relative(path)} does not exist")
        status, text = cls.help_text(path, extra)
        if status != 0 and path.suffix == ".py" and "ModuleNotFoundError" in text:
            return cls.from_source(path)  # --help needs a module this machine lacks (torch)
        if status != 0:
            return cls(path, {}, error=f"{relative(path)} --help exited {status}: "
                                       f"{text.strip().splitlines()[-1:]}")
        usage = cls.parse(path, text)
        if usage.subcommands:
            usage.subcommands = {name: cls.of(path, (name,)) for name in usage.subcommands}
        return usage

    @classmethod
    def parse(cls, path, text):
        lines = text.splitlines()
        at = next((i for i, l in enumerate(lines) if re.match(r"^\s*usage:", l, re.I)), None)
        if at is None:
            return cls(path, {}, error=f"{relative(path)} --help prints no 'Usage:' line")
        synopsis = [re.sub(r"^\s*usage:\s*\S+", "", lines[at], flags=re.I)]
        for line in lines[at + 1:]:
            if line[:1].isspace() and line.strip()[:1] in ("[", "{"):
                synopsis.append(line)
            else:
                break
        synopsis = " ".join(synopsis)
        usage = cls(path, {"--help": False, "-h": False})
        for group in re.findall(r"\[([^\[\]]*)\]", synopsis):
            for alternative in group.split("|"):
                tokens = alternative.split()
                if not tokens:
                    continue
                if tokens[0] == "--":
                    usage.after_double_dash = True
                elif looks_like_flag(tokens[0]):
                    usage.flags[tokens[0]] = len(tokens) > 1
                else:
                    usage.add_placeholder(" ".join(tokens))
        outside = re.sub(r"\[[^\[\]]*\]", " ", synopsis).split()
        i = 0
        while i < len(outside):
            token = outside[i]
            choices = re.fullmatch(r"\{([^{}]*)\}", token)
            if choices and outside[i + 1:i + 2] == ["..."]:
                usage.subcommands = choices.group(1).split(",")
            elif choices:
                usage.words = "any"
            elif looks_like_flag(token):  # a required flag: "--x X"
                takes = i + 1 < len(outside) and re.fullmatch(r"[A-Z][A-Z_]*", outside[i + 1])
                usage.flags[token] = bool(takes)
                i += 1 if takes else 0
            elif token != "...":
                usage.add_placeholder(token)
            i += 1
        # Option lines: "  --seeds N   runs ...", "  -h, --help  show ...", "  -o OUT, --out OUT".
        for line in lines[at + 1:]:
            head = re.match(r"^\s+(-{1,2}[\w-]+.*?)(\s{2,}|$)", line)
            if not head:
                continue
            for piece in head.group(1).split(", "):
                match = re.fullmatch(r"(-{1,2}[\w-]+)(?:[ =](\"?[A-Z][\w\" .]*))?", piece.strip())
                if match:
                    usage.flags.setdefault(match.group(1), bool(match.group(2)))
        if usage.words == "sections":
            usage.words = set(cls.sections(path)) | {"all"}
        return usage

    @classmethod
    def from_source(cls, path):
        """The flags of an argparse script read from its add_argument calls."""
        usage = cls(path, {"--help": False, "-h": False}, words="any")
        for call in re.finditer(r"add_argument\(([^)]*)\)", path.read_text()):
            names = re.findall(r"[\"'](-{1,2}[\w-]+)[\"']", call.group(1))
            switch = re.search(r"action\s*=\s*[\"']store_(true|false)[\"']", call.group(1))
            for name in names:
                usage.flags[name] = not switch
        return usage

    def add_placeholder(self, text):
        if "TESSERA_TRAIN_FLAGS" in text:
            self.pass_train_flags = True
        elif "SECTION" in text:
            self.words = "sections"
        elif "ARGS" in text or "FLAGS" in text:
            self.pass_anything = True
        else:
            self.words = "any"

    @staticmethod
    def sections(path):
        match = re.search(r"^sections=\(([^)]*)\)", path.read_text(), re.MULTILINE)
        return match.group(1).split() if match else []


def check_script_args(script, usage, args, inline, programs):
    if usage.error:
        return [usage.error]
    name = relative(script)
    if usage.subcommands:
        chosen = args[0].split("|") if args and inline else args[:1]
        if not chosen or any(c not in usage.subcommands for c in chosen):
            return [f"{name} expects one of {', '.join(usage.subcommands)} first"]
        return [problem for c in chosen for problem in
                check_script_args(script, usage.subcommands[c], args[1:], inline, programs)]
    problems, i = [], 0
    train = programs.app_help("tessera-train") if usage.pass_train_flags else None
    while i < len(args):
        word = args[i]
        flag = word.split("=", 1)[0]
        if word == "--" and usage.after_double_dash:
            break
        if usage.pass_anything and flag not in usage.flags:
            close = difflib.get_close_matches(flag, usage.flags, n=1, cutoff=0.8)
            if looks_like_flag(word) and close:  # passed on, but more likely a typo of its own
                problems.append(f"{name} has no flag {flag} (did you mean {close[0]}?)")
            break
        i += 1
        if inline and (word in ("...", "…") or is_placeholder(word, True)):
            continue
        if looks_like_flag(word):
            if flag in usage.flags:
                if usage.flags[flag] and "=" not in word:
                    i += 1
            elif train is not None and train.find(flag):
                found, i = check_app_flag(f"{name} (passed to tessera-train)", train, args, i - 1,
                                          inline)
                problems += found
            else:
                known = list(usage.flags) + ([n for o in train.options() for n in o.names]
                                             if train else [])
                problems.append(f"{name} has no flag {flag}{suggestion(flag, known)} (see "
                                f"{name} --help)")
                if "=" not in word and i < len(args) and not looks_like_flag(args[i]):
                    i += 1  # its value
        elif usage.words == "any":
            continue
        elif isinstance(usage.words, set):
            for w in word.split("|") if inline else [word]:
                if w not in usage.words:
                    problems.append(f"{name} has no section '{w}' (sections: "
                                    f"{', '.join(sorted(usage.words))})")
        else:
            problems.append(f"{name} takes no argument '{word}'")
    return problems


# ---- one command ------------------------------------------------------------------------------


def needs_elsewhere(words):
    """Why a command runs only elsewhere (a GPU, Slurm, the internet), or None."""
    for i, word in enumerate(words):
        base = os.path.basename(word)
        if base in ("srun", "sbatch", "salloc"):
            return "needs Slurm"
        if INTERNET.search(word):
            return "needs the internet"
        if word in ("--device=cuda",) or word == "--device" and words[i + 1:i + 2] == ["cuda"]:
            return "needs a GPU"
        if base in ("gpu_check.sh", "gpu_package.sh"):
            return "needs a GPU (or the CUDA toolkit)"
    return None


def check_command(command, programs):
    """(problems, note) of one command: what is wrong with it, and what was not checked."""
    if not command.words:
        return [command.text], None
    index = program_index(command.words)
    if index is None:
        return [], "not a Tessera program"
    word = command.words[index]
    if "*" in word:
        return [], "a pattern, not a command"
    mention = command.inline and index == len(command.words) - 1  # `scripts/plot.py` in prose
    path = script_of(word)
    if path is not None:
        if mention:
            return ([] if (REPO / path).is_file() else [f"{path} does not exist"]), None
        args = command.words[index + 1:]
        return check_script_args(REPO / path, programs.script(path), args, command.inline,
                                 programs), None
    return check_app(command, index, programs)


# ---- the tour ---------------------------------------------------------------------------------


def tour_commands():
    """(line, text) of the README's tour: the first fenced block after its heading."""
    readme = REPO / "README.md"
    lines = readme.read_text().splitlines()
    heading = next((i for i, l in enumerate(lines) if TOUR_HEADING.match(l)), None)
    if heading is None:
        raise SystemExit("error: README.md has no 'A five-minute tour' heading")
    for language, block in fenced_blocks(readme):
        if block and block[0][0] > heading + 1:
            return logical_lines(block, language == "console")
    raise SystemExit("error: README.md has no fenced block under its tour heading")


def write_own_files(commands, work):
    """The files the tour takes as the reader's own (snap:FILE that nothing made), written small."""
    for _, text in commands:
        for match in re.finditer(r"--dataset[ =]snap:(\S+)", text):
            path = work / match.group(1)
            if not path.exists() and not os.path.isabs(match.group(1)):
                print(f"note: the tour reads the reader's own {match.group(1)}: the check writes "
                      f"a small edge list there (a ring of 1000 nodes and its chords)")
                path.write_text("# an edge list of the reader's own\n" + "".join(
                    f"{i} {(i + 1) % 1000}\n{i} {(i * 7 + 3) % 1000}\n" for i in range(1000)))


def run_tour(data_dir, build_dir):
    """Runs the tour as written; returns its problems."""
    commands = tour_commands()
    with tempfile.TemporaryDirectory(prefix="tessera-tour-") as work:
        work = Path(work)
        for entry in REPO.iterdir():
            if entry.name not in (".git", "build"):
                (work / entry.name).symlink_to(entry)
        (work / "build").symlink_to(Path(build_dir).resolve())
        write_own_files(commands, work)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        # The project's environment (Open MPI as root, in containers), more ranks than cores.
        script = [f"source {shlex.quote(str(REPO / 'scripts' / 'common.sh'))}",
                  "export OMPI_MCA_rmaps_base_oversubscribe=1",
                  f"export TESSERA_DATA_DIR={shlex.quote(str(data_dir))}", "set -o pipefail"]
        for line, text in commands:
            words = [w for c in block_commands(REPO / "README.md", "bash", [(line, text)])
                     for w in c.words]
            where = f"README.md:{line}"
            if not words:
                continue
            if re.match(r"^\s*export\s+TESSERA_DATA_DIR=", text):
                print(f"{where}: TESSERA_DATA_DIR={data_dir} (the check's data folder), not "
                      f"`{text.strip()}`")
                continue
            elsewhere = needs_elsewhere(words)
            if elsewhere:
                print(f"{where}: not run, {elsewhere} (its flags are checked): {' '.join(words)}")
                continue
            shown = shlex.quote(text.strip())
            script += [f"echo {shlex.quote('+ ' + where + ': ')}{shown}",
                       "start=$SECONDS",
                       f"{{\n{text}\n}} > .tour.log 2>&1 || {{ status=$?; tail -n 30 .tour.log; "
                       f"echo {shlex.quote(where)}: exited $status: {shown}; exit 1; }}",
                       'echo "  ok in $((SECONDS - start)) s: $(tail -n 1 .tour.log)"']
        started = time.monotonic()
        result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
        print(result.stdout, end="")
        if result.returncode != 0:
            last = result.stdout.strip().splitlines()[-1:] or ["the tour failed"]
            return [f"the tour failed: {last[0]}"]
        print(f"the tour ran as written in {time.monotonic() - started:.0f} s")
    return []


def default_data_dir():
    shared = (REPO / ".." / "shared" / "datasets").resolve()
    return os.environ.get("TESSERA_DATA_DIR") or str(shared)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    parser.add_argument("--data-dir", default=default_data_dir())
    parser.add_argument("--no-run", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    programs = Programs(args.build_dir)

    problems, checked = [], 0
    for command in all_commands():
        bad, note = check_command(command, programs)
        if note == "not a Tessera program":
            continue
        checked += 1
        for problem in bad:
            problems.append(f"{command.where}: {problem}\n    in: {command.text}")
        if note:
            print(f"{command.where}: {note}: {command.text}")
        elif args.verbose and not bad:
            print(f"{command.where}: ok: {' '.join(command.words)}")
    print(f"{checked} commands of Tessera's programs in README.md and docs/ checked against "
          f"their --help, {len(problems)} problem(s)")
    skipped = False
    if not args.no_run:
        if not Path(args.data_dir).is_dir():
            print(f"skipped: the tour was not run: no data folder {args.data_dir} (--data-dir; "
                  f"the tour trains on Cora)")
            skipped = True
        else:
            problems += run_tour(Path(args.data_dir).resolve(), args.build_dir)
    if problems:
        print("\n".join(["error: commands in the docs that do not run as written:"] + problems),
              file=sys.stderr)
        return 1
    return SKIPPED if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
