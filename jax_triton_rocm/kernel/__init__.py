"""A Triton kernel taken apart and one call of it described (`KernelCallSpec`): its arguments
laid onto its parameters, its autotuner's configs, heuristics and hooks applied."""
