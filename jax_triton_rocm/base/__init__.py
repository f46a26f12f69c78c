"""What every layer may use: process-wide state (caches, locks, fork rules), what the installed
jaxlib and Triton offer, and checks of single values (the vendors' facts are `backends`')."""
