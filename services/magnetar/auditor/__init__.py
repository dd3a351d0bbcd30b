"""The auditor: keeps every ledger at Qw live copies (docs/auditor.md)."""
