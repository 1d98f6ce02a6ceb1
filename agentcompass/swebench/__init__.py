"""SWE-bench support: datasets, per-instance images, eval scripts, log parsers and grading.

The benchmarks themselves (``swebench``, ``swebench_verified``, ``swebench_lite``, ``swebench_jsonl``,
``swebench_local``) live in ``agentcompass.benchmarks.swebench``; this package holds what they share.
"""
