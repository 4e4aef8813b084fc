"""Disk-backed data and file I/O: atomic writes, Parquet tables, packed bookkeeping."""
