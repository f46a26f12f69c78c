"""`triton_kernel_p` and all its rules, the rule that picks a route, and the routes: jaxlib's
Triton custom call (`jaxlib`), XLA's own (`xla`) and the CPU interpreter (`cpu`)."""
