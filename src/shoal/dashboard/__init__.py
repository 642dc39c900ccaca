"""The read-only web dashboard served by `shoal run --ui-port`: a surface over the scheduling report.

Nothing imports it but `shoal.cli` (which wires it into the service it starts).
"""
