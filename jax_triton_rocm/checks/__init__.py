"""The one checker of a call's arguments, for `triton_call` and `triton_call_lowering` alike."""
