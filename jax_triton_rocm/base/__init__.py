"""What every layer may use: process-wide state (caches, locks, fork rules), what the installed
jaxlib and Triton offer, checks of single values (the vendors' facts are `backends`'), and the one
reader of the environment (`_env`)."""
