"""The ledger client: talks to bookies and (next) turns them into replicated ledgers."""
