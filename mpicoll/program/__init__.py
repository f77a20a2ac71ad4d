"""A call bound to its buffers (its plan), the key that finds it again, and each communicator's cache and state."""
