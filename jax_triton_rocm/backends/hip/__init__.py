"""AMD (HIP): the backend, its HSACO files for path delivery, and the prewarm launch."""
