"""What two or more services share: errors, config, logging, metrics, names."""
