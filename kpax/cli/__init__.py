"""kpax.cli — the `kpax` command.

Imports: the public kpax API (kpax.Producer, kpax.Consumer, kpax.Admin).
"""
