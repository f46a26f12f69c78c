"""A spec, the operands' types and a target turned into launches: launch configurations, arguments
laid onto parameters, the trampoline."""
