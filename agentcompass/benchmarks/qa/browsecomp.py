"""``browsecomp``: OpenAI's BrowseComp (1,266 hard-to-find facts for browsing agents), graded by a judge
(``correct: yes|no``).

Data: the encrypted CSV simple-evals publishes (``browse_comp_test_set.csv``: ``problem``, ``answer``,
``problem_topic``, ``canary``), downloaded from ``URL`` (simple-evals' own source; no Hub copy exists) and cached
under ``data_dir`` (``qa_url.py``); the ``url`` param points at another copy, ``download_timeout`` bounds the
transfer. ``problem`` and ``answer`` are base64 of the text XORed with a key stream: SHA-256 of the row's
``canary``, repeated to the text's length. Task ids ``browsecomp-0000``...; the category is ``problem_topic``.

What reaches the run directory: the decrypted question is the agent's prompt, so it is in the trajectory (with
the agent's own answer); the reference answer is not written: the judge's prompt is recorded by its template and
sha256 only (``record_judge_prompt`` false), and the reference answer is masked in the judge's recorded reply.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import ClassVar

import msgspec

from ..._errors import ConfigError
from ..._validate import Seconds
from ...common.hub import HubSettings
from .hub_files import read_rows
from .judge import Grader, YesNoGrader
from .judged import JudgedQA, JudgedQAParams, QAItem
from .url_file import url_file

#: where simple-evals (``browsecomp_eval.py``) reads the test set
URL = "https://openaipublic.blob.core.windows.net/simple-evals/browse_comp_test_set.csv"

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


class BrowseCompParams(JudgedQAParams, frozen=True):
    """``JudgedQAParams`` and: ``url`` (the CSV; default simple-evals' ``URL``), ``download_timeout`` (seconds for
    the whole download; default 60)."""

    url: str = URL
    download_timeout: Seconds = 60.0


class BrowseComp(JudgedQA):
    """BrowseComp (params: ``BrowseCompParams``)."""

    name: ClassVar[str] = "browsecomp"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "web_research"
    Params: ClassVar[type[JudgedQAParams]] = BrowseCompParams
    #: the reference answers are encrypted at rest: keep them out of the run directory
    records_judge_prompt: ClassVar[bool] = False

    def load_items(self) -> list[QAItem]:
        p = self.p
        assert isinstance(p, BrowseCompParams)
        if not p.url.startswith(("https://", "http://")):
            raise ConfigError(f"{self.where}: url must be an http(s) URL, not {p.url!r}", field="benchmark.params.url")
        path, got = url_file(self.where, p.url, FILE, data_dir=self.data_dir, timeout=p.download_timeout,
                             offline=HubSettings.from_env().offline)
        self.source = {"kind": "url", **msgspec.to_builtins(got)}
        out = []
        for n, row in enumerate(read_rows(path)):
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


__all__ = ["URL", "BrowseComp", "BrowseCompParams", "decrypt", "encrypt", "key_stream"]
