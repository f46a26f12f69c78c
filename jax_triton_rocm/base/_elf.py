"""The layout of a 64-bit little-endian ELF file (a CUBIN, an HSACO), shared by the compile
cache's binary check (`compile._cache.binary_problem`) and the CUBIN the call carries
(`backends._cuda.without_ptx_text`), each of which reads it within bounds."""

from __future__ import annotations

import struct

HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # the ELF64 header
SECTION = struct.Struct("<IIQQQQIIQQ")  # one ELF64 section header
