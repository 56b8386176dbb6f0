"""Kueue: the names and values Arbiter writes and the objects the rules compile to."""
