"""What users call: `triton_call`, `triton_call_lowering`, `target_arch`, `kernel_calls`,
`autotune` and `partitioned`. Each call is checked into one spec (`checks`) and lowered
(`routes`)."""
