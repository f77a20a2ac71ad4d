"""What runs a call's bound rounds on MPI: blocking, as requests, watched, as a stand-in; progress; the recorder."""
