"""Which algorithm a call runs: ``choose`` (the argument, ``MPICOLL_ALGO``, the tuning file, the cost model or
the collective's rule table), all local functions of the call and of data its communicator agreed on."""
