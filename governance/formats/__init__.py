"""Date formats, one per language (``FORMAT_MODULE_PATH``): every page and mail shows a date
the same way, short or long ("30 Nov 2026, 14:05" / "2026年11月30日 14:05"). What is not set
here comes from Django's own locale formats (the input formats of forms, for example)."""
