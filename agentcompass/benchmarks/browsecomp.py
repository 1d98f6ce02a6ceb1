"""``browsecomp``: OpenAI's BrowseComp (1,266 hard-to-find facts for browsing agents), graded by a judge
(``correct: yes|no``).

Data: the encrypted CSV simple-evals publishes (``browse_comp_test_set.csv``: ``problem``, ``answer``,
``problem_topic``, ``canary``), from the Hub dataset ``openai/BrowseComp`` by default (``repo`` names another copy).
``problem`` and ``answer`` are base64 of the text XORed with a key stream: SHA-256 of the row's ``canary``,
repeated to the text's length; they are decrypted in memory only. Task ids ``browsecomp-0000``...; the category is
``problem_topic``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path
from typing import ClassVar

from .._errors import ConfigError
from .hub_qa import HubQA
from .judge import Grader, YesNoGrader
from .judged_qa import QAItem
from .qa_hub import read_rows

FILE = "browse_comp_test_set.csv"
ANSWER_FORMAT = ("\n\nAnswer in this format:\nExplanation: <your explanation for your final answer>\n"
                 "Exact Answer: <your succinct, final answer>\nConfidence: <your confidence in your answer, "
                 "0% to 100%>")


def key_stream(password: str, length: int) -> bytes:
    """SHA-256 of ``password``, repeated (and cut) to ``length`` bytes."""
    digest = hashlib.sha256(password.encode()).digest()
    return (digest * (length // len(digest) + 1))[:length]


def decrypt(ciphertext_b64: str, password: str) -> str:
    """One BrowseComp field: base64-decoded, XORed with ``key_stream(password)``, UTF-8."""
    data = base64.b64decode(ciphertext_b64)
    return bytes(a ^ b for a, b in zip(data, key_stream(password, len(data)), strict=True)).decode()


def encrypt(plaintext: str, password: str) -> str:
    """The inverse of ``decrypt`` (for tests and tiny local copies)."""
    data = plaintext.encode()
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key_stream(password, len(data)), strict=True))).decode()


class BrowseComp(HubQA):
    """BrowseComp (params: ``HubQAParams``)."""

    name: ClassVar[str] = "browsecomp"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "web_research"
    repo: ClassVar[str] = "openai/BrowseComp"

    def patterns(self) -> list[str]:
        return [FILE]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        out = []
        for n, row in enumerate(read_rows(files[FILE])):
            try:
                problem = decrypt(row["problem"], row["canary"])
                answer = decrypt(row["answer"], row["canary"])
            except (KeyError, ValueError, binascii.Error) as exc:
                raise ConfigError(f"{self.where}: row {n} of {FILE} cannot be decrypted ({type(exc).__name__}: "
                                  f"{exc}); is it the encrypted BrowseComp CSV?", field="data_dir") from None
            out.append(QAItem(id=f"browsecomp-{n:04d}", question=problem, prompt=problem + ANSWER_FORMAT,
                              answer=answer,
                              category=row.get("problem_topic") or None))
        return out

    def grader_for(self, kind: str) -> Grader:
        return YesNoGrader()


__all__ = ["BrowseComp", "decrypt", "encrypt", "key_stream"]
