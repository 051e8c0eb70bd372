"""What the bytes of a source mean: one module per transcript format."""
