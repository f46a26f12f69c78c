"""What every layer may use: process-wide state (caches, locks, fork rules), what the installed
packages offer, the vendors' facts, and checks of single values."""
