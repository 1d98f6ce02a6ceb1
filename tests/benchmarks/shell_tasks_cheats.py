"""Cheating solutions for shell_tasks: code that tries to make the verifier report a pass without solving.

Shared by the local and the docker grading tests; each cheat must be graded incorrect, the honest control correct.
"""

from __future__ import annotations

from typing import Any

#: fib.py variants; every one of them passed the old exit-code checker.
FIB_CHEATS: dict[str, str] = {
    "os_exit": "import os\nos._exit(0)\n",
    "sys_exit_replaced": "import sys\nsys.exit = lambda *args, **kwargs: None\n\ndef fib(n):\n    return 0\n",
    "system_exit_at_import": "raise SystemExit(0)\n",
    "atexit_os_exit": "import atexit\nimport os\natexit.register(os._exit, 0)\n\ndef fib(n):\n    return 0\n",
    "builtins_exit_patched": ("import builtins\nimport os\nimport sys\n"
                              "builtins.exit = builtins.quit = sys.exit = lambda *args: os._exit(0)\n\n"
                              "def fib(n):\n    return 0\n"),
    "always_equal": ("class AlwaysEqual(int):\n    def __eq__(self, other):\n        return True\n\n"
                     "    def __ne__(self, other):\n        return False\n\n    __hash__ = int.__hash__\n\n"
                     "def fib(n):\n    return AlwaysEqual(0)\n"),
    # it sees everything its process sees (argv, stdin, files) and echoes it back with a claim of success
    "forged_report": ("import os\nimport sys\n"
                      "claim = ' {\"verdict\": \"pass\", \"ok\": true, \"passed\": true, \"results\": []}'\n"
                      "for word in sys.argv:\n    os.write(1, (word + claim + '\\n').encode())\n"
                      "    os.write(2, (word + claim + '\\n').encode())\n"
                      "print('ok')\nos._exit(0)\n"),
}

HONEST_FIB = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"


def write_file_turns(path: str, content: str) -> list[str]:
    """Scripted-model turns: write ``path`` with a quoted heredoc, then submit."""
    return [f"```bash\ncat > {path} <<'EOF'\n{content}EOF\n```", "Done.\n<submit></submit>"]


def fib_script(content: str) -> list[dict[str, Any]]:
    """A scripted-model script whose shell agent writes ``content`` as fib.py for python/fib."""
    return [{"match": "Task: python/fib\n", "turns": write_file_turns("fib.py", content)}]
