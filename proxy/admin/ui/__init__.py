"""The web dashboard served at /runguard/ui/ (see docs/dashboard.md)."""
