"""The checks of a call's arguments, for `triton_call` and `triton_call_lowering` alike: taken
(`_arguments`), bound (`_binder`), placed and checked into a spec (`_bound`, `_checker`); what a
kernel uses each parameter as (`_kinds`) and what it writes (`_misplaced`, at the lowering)."""
