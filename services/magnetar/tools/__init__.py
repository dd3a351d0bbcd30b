"""The command-line tools behind the ``magnetar`` command: admin, shell, produce/consume, tokens, health, standalone."""
