"""LaSR: fusion head and FIFO-queue objectives (LiRA paper §4.2, App. D.4)."""
