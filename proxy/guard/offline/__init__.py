"""Replaying recorded traffic through the detectors, offline, and what a replay means."""
