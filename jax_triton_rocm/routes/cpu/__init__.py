"""The CPU route: a call's kernel run by Triton's interpreter on host buffers."""
