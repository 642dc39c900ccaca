# The two Quick start commands: `make run` (set up + run the main job) and `make test`
# (set up + run the whole test suite). Both install what they need themselves.
SHELL := /bin/bash
.PHONY: run test lint unit e2e bench

run:
	@venv=$$(scripts/bootstrap) && $$venv/bin/shoal simulate --out reports/simulate-default

test:
	@scripts/test

lint:
	@venv=$$(scripts/bootstrap) && scripts/lint $$venv
