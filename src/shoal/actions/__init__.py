"""shoal.actions: allocate, consolidation, reclaim, preempt, stalegangeviction."""
