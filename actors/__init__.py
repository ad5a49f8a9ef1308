"""actormq actors package."""
