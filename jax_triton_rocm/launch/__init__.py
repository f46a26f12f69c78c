"""What a launch is made of: the kernel taken apart, its launch configurations, the arguments laid
onto its parameters, the grid, the dtypes and the target's limits."""
