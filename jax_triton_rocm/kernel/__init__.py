"""A Triton kernel taken apart and one call of it described (`KernelCallSpec`): its arguments
laid onto its parameters, its autotuner's configs and heuristics applied, its hooks run on
stand-ins. Used by every layer above; runs the user's code that decides a launch, and raises
the errors met there."""
