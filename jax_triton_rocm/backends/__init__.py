"""What the lowering asks a vendor: the `Backend` interface, one module per vendor."""
