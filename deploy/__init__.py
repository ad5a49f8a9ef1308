"""actormq deploy package."""
