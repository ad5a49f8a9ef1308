"""actormq protocol package."""
