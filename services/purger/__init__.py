"""The purger: makes a deletion reach every sink, and proves it with a receipt."""
