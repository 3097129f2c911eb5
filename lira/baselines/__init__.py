"""Baseline losses from the four comparison papers, one file per paper."""
