"""The call's data model: one `KernelCallSpec` per call (the kernel, its grid, its arguments' types
and roles, their layout onto the kernel's parameters), used by every layer below the checks."""
