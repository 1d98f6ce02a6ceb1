"""A small, forgiving reading of shell commands: which files a command reads, writes, edits or deletes.

Not a shell parser: it splits on ``; && || | &`` and newlines, knows heredocs and redirections, and knows
the file arguments of a few common programs. Anything it cannot tokenise falls back to whitespace splitting.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&"}
_WRITE_REDIRECTS = {">", ">|", "&>", ">>", "&>>"}
_PREFIXES = {"sudo", "env", "command", "nohup", "time", "exec", "builtin"}
_READERS = {"cat", "head", "tail", "less", "more", "nl", "grep", "egrep", "fgrep", "rg", "awk", "wc", "diff",
            "cmp", "ls", "stat", "file", "sort", "uniq", "cut", "python", "python3", "pytest", "bat", "view", "vim",
            "vi", "nano", "od", "xxd", "md5sum", "sha256sum", "jq"}
_DELETERS = {"rm", "unlink", "shred", "rmdir"}
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PY_WRITE = re.compile(r"""open\(\s*(['"])([^'"\n]+)\1\s*,\s*(['"])[wax]""")
_PY_DELETE = re.compile(r"""(?:os\.(?:remove|unlink)|shutil\.rmtree)\(\s*(['"])([^'"\n]+)\1""")


@dataclass
class Command:
    """One simple command: its words, its redirections and the heredoc fed to it."""

    argv: list[str]
    redirects: list[tuple[str, str]] = field(default_factory=list)
    heredoc: str | None = None


@dataclass
class FileOp:
    """``op`` is ``read``, ``write`` (create or overwrite), ``append``, ``edit`` (in place) or ``delete``."""

    op: str
    path: str


def _tokens(line: str) -> list[str]:
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
        lex.whitespace_split = True
        return list(lex)
    except ValueError:  # unbalanced quotes and the like
        return line.split()


def _commands(tokens: list[str]) -> list[Command]:
    out: list[Command] = []
    cur = Command([])
    it = iter(range(len(tokens)))
    for i in it:
        tok = tokens[i]
        if tok in _SEPARATORS:
            if cur.argv or cur.redirects:
                out.append(cur)
            cur = Command([])
        elif tok in _WRITE_REDIRECTS or tok in ("<", ">&", "<&", "<<<"):
            if i + 1 < len(tokens):
                cur.redirects.append((tok, tokens[i + 1]))
                next(it, None)
        else:
            cur.argv.append(tok)
    if cur.argv or cur.redirects:
        out.append(cur)
    return out


def parse(script: str) -> list[Command]:
    """The simple commands of a shell script, heredoc bodies attached to the command that reads them."""
    lines = script.split("\n")
    out: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i]
            i += 1
        body: str | None = None
        m = _HEREDOC.search(line)
        if m is not None:
            delim = m.group(2)
            start = i
            while i < len(lines) and lines[i].strip() != delim:
                i += 1
            body = "\n".join(lines[start:i])
            i += 1
            line = line[: m.start()] + line[m.end():]
        cmds = _commands(_tokens(line))
        if body is not None and cmds:
            cmds[0].heredoc = body
        out.extend(cmds)
    return out


def norm_path(path: str) -> str:
    """A path for comparison: quotes and ``./`` removed, normalised."""
    p = path.strip().strip("'\"")
    return posixpath.normpath(p) if p else p


def same_path(a: str, b: str) -> bool:
    """Equal, or one is the other with a leading directory (``/testbed/x/y`` vs ``x/y``)."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _operands(argv: list[str], takes_value: tuple[str, ...] = ()) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg in takes_value:
            skip = True
            continue
        if arg.startswith("-") and arg != "-":
            continue
        out.append(arg)
    return out


def _program(argv: list[str]) -> list[str]:
    """argv without ``VAR=value`` assignments and wrappers like sudo/env."""
    i = 0
    while i < len(argv) and (_ASSIGN.match(argv[i]) or argv[i] in _PREFIXES):
        i += 1
    return argv[i:]


def _in_place_flag(prog: str, arg: str) -> bool:
    if arg.startswith(("-i", "--in-place")):
        return True
    # perl bundles its switches: -pi, -pie, -i.bak
    return prog == "perl" and arg.startswith("-") and not arg.startswith("--") and "i" in arg[1:]


def file_ops(cmd: Command) -> list[FileOp]:
    """The file operations of one simple command (best effort)."""
    ops: list[FileOp] = []
    for op, target in cmd.redirects:
        if target.isdigit() or target.startswith("/dev/"):
            continue
        if op in (">>", "&>>"):
            ops.append(FileOp("append", target))
        elif op in _WRITE_REDIRECTS:
            ops.append(FileOp("write", target))
        elif op == "<":
            ops.append(FileOp("read", target))
    argv = _program(cmd.argv)
    if not argv:
        return ops
    prog = posixpath.basename(argv[0])
    if prog in _DELETERS:
        ops += [FileOp("delete", a) for a in _operands(argv)]
    elif prog == "git" and len(argv) > 1 and argv[1] == "rm":
        ops += [FileOp("delete", a) for a in _operands(argv[1:])]
    elif prog == "mv":
        args = _operands(argv, ("-t", "--target-directory", "-S", "--suffix"))
        if len(args) >= 2:
            ops += [FileOp("delete", a) for a in args[:-1]] + [FileOp("write", args[-1])]
    elif prog in ("cp", "install"):
        args = _operands(argv, ("-t", "--target-directory", "-m", "--mode", "-S", "--suffix"))
        if len(args) >= 2:
            ops += [FileOp("read", a) for a in args[:-1]] + [FileOp("write", args[-1])]
    elif prog in ("sed", "perl"):
        in_place = any(_in_place_flag(prog, a) for a in argv[1:])
        has_script_opt = any(a in ("-e", "-f", "--expression", "--file", "-E") for a in argv[1:])
        args = _operands(argv, ("-e", "-f", "--expression", "--file", "-E", "-l"))
        if prog == "sed" and not has_script_opt and args:
            args = args[1:]  # the first operand is the sed script
        ops += [FileOp("edit" if in_place else "read", a) for a in args]
    elif prog == "truncate":
        ops += [FileOp("edit", a) for a in _operands(argv, ("-s", "--size", "-r", "--reference"))]
    elif prog == "tee":
        op = "append" if any(a in ("-a", "--append") for a in argv[1:]) else "write"
        ops += [FileOp(op, a) for a in _operands(argv)]
    elif prog == "find" and ("-delete" in argv or any(a == "rm" for a in argv)):
        for a in argv[1:]:
            if a.startswith("-") or a in ("!", "("):
                break
            ops.append(FileOp("delete", a))
    elif prog in _READERS:
        ops += [FileOp("read", a) for a in _operands(argv, ("-n", "-e", "-f", "-m", "-A", "-B", "-C", "-c"))]
    return ops


def script_file_ops(script: str) -> tuple[list[FileOp], list[str]]:
    """(file operations, heredoc bodies) of a whole command text, Python ``open(..., 'w')`` and
    ``os.remove`` calls included."""
    ops: list[FileOp] = []
    bodies: list[str] = []
    for cmd in parse(script):
        ops += file_ops(cmd)
        if cmd.heredoc is not None:
            bodies.append(cmd.heredoc)
    ops += [FileOp("write", m.group(2)) for m in _PY_WRITE.finditer(script)]
    ops += [FileOp("delete", m.group(2)) for m in _PY_DELETE.finditer(script)]
    return ops, bodies
