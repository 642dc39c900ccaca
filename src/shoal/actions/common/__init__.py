"""Machinery several actions share: job allocation and node choice (allocate and every
simulation), candidate victims and the preemptor loop (reclaim, preempt, consolidation), the
victim solver with its scenario filters, victim log, victim scan and scenario simulation, and
capacity pruning. Modules here never import an action module (import-linter contract)."""
