"""`triton_kernel_p` and its lowering rules: the route a call takes (jaxlib's Triton custom call,
XLA's own, or the CPU interpreter), the target it compiles for, and the encoded custom call."""
