"""New problems composed from a catalogue of seed PyTorch ops, in CUDA Agent's manner (issue 7)."""
