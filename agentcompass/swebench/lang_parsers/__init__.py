"""Log parsers of the non-Python SWE-bench languages, one module per language."""
