"""Input kinds: discovery and columnar loading, the only modules that read input files."""
