"""The simulated GPU: built-in and user profiles, the physics of its levels, and a device that
answers the same timing calls as the real one (no torch, no GPU)."""
