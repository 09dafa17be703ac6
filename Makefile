# kpax — the two commands are `make demo` and `make test`; each sets itself up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kpax-installed
## What `make demo` needs, in the same venv: kpax and its `testing` extra only
## (the `dev` extra that `make test` installs is a superset, so it marks this done too).
DEMO_STAMP := $(VENV)/.kpax-demo-installed
C_SOURCES  := kpax/proto/_speedups.c kpax/producer/_sendpath.c kpax/proto/_varint.h
## Apache Kafka's JSON message specs kpax/proto is generated from: taken out of the
## kafka-clients jar of SPECS_VERSION (tools/kafka_specs.py; cached under ~/.cache/kpax).
SPECS_VERSION := $(shell sed -n 's/^SPECS_KAFKA_VERSION = "\(.*\)"/\1/p' tools/kafka_specs.py)
SPECS  ?= $(HOME)/.cache/kpax/specs/$(SPECS_VERSION)

.PHONY: all demo tools krb5 test test-fast test-sim test-soak test-pythons docs unit integration lint typecheck specs generate check-generated bench bench-franz kafka-jars clean distclean demo-spark test-stress test-matrix test-matrix-smoke

all: test

$(STAMP): pyproject.toml setup.py $(C_SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml setup.py $(C_SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[testing]'
	@touch $(DEMO_STAMP)

venv: $(STAMP)

## Fetch Apache Kafka's jars from Maven Central once (cached under ~/.cache/kpax).
kafka-jars: $(DEMO_STAMP)
	$(PY) -m kpax.testing.cli fetch

## The main job, against a local Kafka it starts and stops (needs kpax[testing] only).
demo: $(DEMO_STAMP) kafka-jars
	$(PY) -m kpax.cli.demo

## MIT Kerberos (Debian packages) for the SASL GSSAPI tests: a test KDC (krb5kdc, kdb5_util;
## kadmin.local from krb5-admin-server) and the headers the gssapi package builds against
## (libkrb5-dev). Best effort: without them tests/integration/test_kerberos.py fails, naming them.
KRB5_PACKAGES := krb5-kdc krb5-admin-server libkrb5-dev
krb5:
	@{ command -v krb5kdc || test -x /usr/sbin/krb5kdc; } >/dev/null \
		&& { command -v kadmin.local || test -x /usr/sbin/kadmin.local; } >/dev/null \
		&& command -v krb5-config >/dev/null \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(KRB5_PACKAGES)) \
		|| echo "krb5: could not install $(KRB5_PACKAGES); tests/integration/test_kerberos.py will fail"

## The gssapi package (the `gssapi` extra of pyproject.toml), for SASL GSSAPI: on Linux pip
## builds it against MIT Kerberos (make krb5). Best effort, as above.
GSSAPI_STAMP := $(VENV)/.kpax-gssapi
$(GSSAPI_STAMP): $(STAMP) | krb5
	@$(PY) -m pip install -q 'gssapi>=1.8' && touch $@ \
		|| echo "venv: could not install the gssapi package; tests/integration/test_kerberos.py will fail"

## kcat (Debian package) for the CLI interop tests; best effort: without it those tests fail.
tools:
	@command -v kcat >/dev/null || (apt-get update -qq && apt-get install -y -qq kcat) \
		|| echo "tools: could not install kcat; tests/integration/test_cli_kcat.py will fail"

## The PySpark example pipeline (events -> Kafka -> Spark via "kpax" -> aggregate -> Kafka).
demo-spark: $(STAMP) kafka-jars
	$(PY) examples/spark_pipeline.py

lint: $(STAMP)
	$(PY) -m ruff check kpax tests bench tools cmd
	$(PY) -m ruff format --check kpax tests bench tools cmd

typecheck: $(STAMP)
	$(PY) -m mypy

## kpax/proto/messages is generated from Apache Kafka's JSON specs; each client's
## Settings fields (kpax/*/settings_fields.py) from its options' declarations.
specs: $(STAMP)
	@test -f $(SPECS)/VERSION || $(PY) tools/kafka_specs.py --version $(SPECS_VERSION) --out $(SPECS)

generate: specs
	$(PY) tools/gen_proto.py --specs $(SPECS)
	$(PY) tools/gen_settings.py

check-generated: specs
	$(PY) tools/gen_proto.py --specs $(SPECS) --check
	$(PY) tools/gen_settings.py --check

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP) $(GSSAPI_STAMP) kafka-jars tools
	$(PY) -m pytest tests/integration tests/interop tests/faults

## The documentation site (guides + API reference from the docstrings) into site/;
## strict: a warning (broken link, bad docstring, option without text) fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

## Everything: lint, types, generated code up to date, docs build, unit + integration suites
## (against the default Kafka), then a quick check against the other Kafka versions and
## the wheel on each supported Python.
## The suite runs as two pytest processes side by side: the fast tier (CPU-bound, no JVM;
## its output is printed when it ends) and the tests against real brokers (which mostly
## wait on them). Both must pass.
FAST_LOG := .pytest-fast-tier.log
test: $(STAMP) $(GSSAPI_STAMP) kafka-jars tools lint typecheck check-generated docs
	@KPAX_TEST_NO_JVM=1 PYTHONHASHSEED=0 $(PY) -m pytest -q -p no:cacheprovider $(FAST_TESTS) \
		> $(FAST_LOG) 2>&1 & fast=$$!; \
	PYTHONHASHSEED=0 $(PY) -m pytest -m "not soak" $(addprefix --ignore=,$(FAST_TESTS)) tests; \
	real=$$?; wait $$fast; fastrc=$$?; \
	echo "=== the fast tier ($(FAST_TESTS)), run beside the above:"; cat $(FAST_LOG); \
	test $$real -eq 0 && test $$fastrc -eq 0
	@$(MAKE) --no-print-directory test-matrix MATRIX="$(MATRIX_OTHERS)" MATRIX_TESTS="$(QUICK_TESTS)"
	@$(MAKE) --no-print-directory test-pythons

## The fast tier: unit, byte-level, in-process-Kafka and simulation tests, with no JVM
## (KPAX_TEST_NO_JVM: a test that would start one fails at once). A few minutes.
FAST_TESTS ?= tests/unit tests/fake tests/sim
## Processes running them (pytest-xdist; `auto`: one per core). `make test` runs the
## tier in one process beside the real-broker tests instead.
FAST_WORKERS ?= auto
test-fast: $(STAMP)
	KPAX_TEST_NO_JVM=1 PYTHONHASHSEED=0 $(PY) -m pytest -q -n $(FAST_WORKERS) $(FAST_TESTS)

## The seeded simulations alone, with more seeds: SEEDS=N (0..N-1), A:B, or A,B,C (see
## tests/sim/__init__.py); a failing seed fails again the same way.
SEEDS ?= 200
test-sim: $(STAMP)
	SEEDS=$(SEEDS) KPAX_TEST_NO_JVM=1 PYTHONHASHSEED=0 $(PY) -m pytest -q -n $(FAST_WORKERS) tests/sim

## The soak tests (marker `soak`, not in `make test`): the exactly-once Spark sink under ten
## kills, the Spark tests again on a standalone cluster, --py-files on the cluster. ~15 min.
test-soak: $(STAMP) kafka-jars
	$(PY) -m pytest -m soak tests

## The whole suite 3 times in a row while a CPU hog keeps one core busy (not part of `make test`).
test-stress: $(STAMP) kafka-jars tools
	$(PY) tools/stress.py --runs 3

## The broker matrix (not part of `make test`): the integration suite once per Kafka version
## of MATRIX (the versions kpax.testing pins; KPAX_KAFKA_VERSION picks each one). Every
## version is run even if one fails; the summary names the failed ones and the exit is 1.
MATRIX ?= 3.9.2 4.3.1 4.4.0
MATRIX_TESTS ?= tests/integration tests/interop tests/faults
SMOKE_TESTS ?= \
	tests/integration/test_broker_real.py::test_api_versions_lists_produce_fetch_metadata \
	tests/integration/test_producer.py::test_send_returns_metadata_and_records_read_back \
	tests/integration/test_consumer.py::test_assign_poll_records_have_every_field \
	tests/integration/test_consumer.py::test_read_committed_hides_aborted_and_control_records \
	"tests/integration/test_consumer_group.py::test_three_members_share_six_partitions_and_see_every_record_once[range]" \
	tests/integration/test_consumer_group.py::test_commit_sync_async_and_restart_resumes_at_committed \
	tests/integration/test_transactions.py::test_commit_and_abort_visibility \
	tests/integration/test_transactions.py::test_offsets_in_a_transaction \
	tests/integration/test_admin.py::test_create_describe_delete_topics_with_per_item_results \
	tests/integration/test_admin.py::test_group_offsets_list_describe_delete

test-matrix: $(STAMP) tools
	@failed=""; for v in $(MATRIX); do \
		echo "=== Kafka $$v: $(MATRIX_TESTS)"; \
		$(PY) -m kpax.testing.cli fetch --version $$v || { failed="$$failed $$v"; continue; }; \
		KPAX_KAFKA_VERSION=$$v $(PY) -m pytest -q $(MATRIX_TESTS) || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-matrix: failed on Kafka$$failed"; exit 1; fi; \
	echo "test-matrix: passed on Kafka $(MATRIX)"

## The same per version, a handful of tests only: produce, consume, a group, transactions, admin.
test-matrix-smoke: MATRIX_TESTS = $(SMOKE_TESTS)
test-matrix-smoke: test-matrix

## What `make test` runs against each version but the default one (~10 s a version).
KAFKA_DEFAULT := $(shell sed -n 's/^DEFAULT_KAFKA_VERSION = "\(.*\)"/\1/p' kpax/testing/jars.py)
MATRIX_OTHERS := $(filter-out $(KAFKA_DEFAULT),$(MATRIX))
QUICK_TESTS ?= \
	tests/integration/test_producer.py::test_send_returns_metadata_and_records_read_back \
	tests/integration/test_share_consumer_faults.py::test_brokers_without_share_groups_say_so \
	tests/integration/test_consumer_group.py::test_commit_sync_async_and_restart_resumes_at_committed \
	tests/integration/test_transactions.py::test_commit_and_abort_visibility

## The Pythons kpax supports: those pyproject.toml's classifiers declare. `make test` builds
## the wheel with each and runs a round trip with it (tools/python_versions.py: a venv per
## version cached in ~/.cache/kpax/pythons, made again when pyproject.toml, setup.py or the C
## sources change; the wheel rebuilt when a file in it changes). About 35 s with the venvs
## made, 3-4.5 min without.
PYVERSIONS ?= $(shell sed -n 's/.*"Programming Language :: Python :: \(3\.[0-9]*\)".*/\1/p' pyproject.toml)
test-pythons: $(STAMP) kafka-jars
	$(PY) tools/python_versions.py $(PYVERSIONS)

bench: $(STAMP) kafka-jars bench-franz
	$(PY) -m bench all

## The franz-go peer of the producer/consumer benchmarks (bench/franz, a Go program; its
## module comes from the Go module proxy). Best effort: without Go that peer is reported failed.
bench-franz:
	@command -v go >/dev/null && (cd bench/franz && go build -buildvcs=false -trimpath -o franz-bench .) \
		|| echo "bench-franz: could not build bench/franz (Go toolchain needed); the franz-go peer will fail"

clean:
	rm -rf .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info site
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .venv-py3* $(HOME)/.cache/kpax/pythons
