"""Reports: tables and plots from results.jsonl (see harness report)."""
