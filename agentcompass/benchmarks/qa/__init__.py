"""Judged question-answering benchmarks (HLE, BrowseComp, SimpleQA, SealQA, FrontierScience, GPQA,
``qa_local``) and their LLM judge."""
