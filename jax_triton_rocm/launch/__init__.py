"""What a launch is made of: the call's spec (`_spec`), turned with the operands' types and a
target into launches (`_plan`): the kernel taken apart, its launch configurations, the arguments
laid onto its parameters, the grid, the dtypes and the target's limits."""
