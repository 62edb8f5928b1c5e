"""Proposers write child agent designs; the admission gate decides which children enter the tree."""
