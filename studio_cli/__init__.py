"""studio-cli: Kernel Studio's REST API from a terminal (login, submit a folder as a batch, wait, print
the results table, download kernels). Talks HTTP only; never imports Django."""
