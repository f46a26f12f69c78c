"""The route through jaxlib's Triton custom call: the encoded call, its opaque payload and protos,
TMA descriptors."""
