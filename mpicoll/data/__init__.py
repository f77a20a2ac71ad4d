"""What a call's data are: buffer arguments, datatypes, device memory, reduction ops and kernels, fixed point."""
