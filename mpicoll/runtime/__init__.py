"""What runs a call on MPI: buffers, datatypes, ops and kernels, plans and their caches, executors, GPU transports."""
