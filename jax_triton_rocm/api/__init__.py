"""What users call: `triton_call`, `triton_call_lowering`, `target_arch`, the `jax.vmap` rules,
`kernel_calls` and `partitioned`. Each call is checked into one spec (`checks`) and lowered
(`routes`)."""
