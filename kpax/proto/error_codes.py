"""Placeholder until tools/gen_proto.py generates the per-code error classes."""
