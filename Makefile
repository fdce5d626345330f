# distseq: unique integer ids across PostgreSQL servers
EXTENSION = distseq
MODULE_big = distseq
OBJS = \
	src/distseq.o \
	src/shmem.o \
	src/pool.o \
	src/nametab.o \
	src/nextval.o \
	src/inuse.o \
	src/increate.o \
	src/sequence.o \
	src/ownedby.o \
	src/spi.o \
	src/rows.o \
	src/catalog.o \
	src/windows.o \
	src/status.o \
	src/message.o \
	src/mailbox.o \
	src/sources.o \
	src/refill.o \
	src/worker.o \
	src/standby.o \
	src/fdw.o \
	src/answer.o \
	src/remote.o \
	src/rest.o \
	src/member.o \
	src/client.o \
	src/change.o \
	src/settle.o \
	src/agent.o \
	src/redefine.o \
	src/peer.o \
	src/group.o

DATA = distseq--1.0.sql distseq--1.0--1.1.sql distseq--1.1--1.2.sql \
	distseq--1.2--1.3.sql distseq--1.3--1.4.sql distseq--1.4--1.5.sql \
	distseq--1.5--1.6.sql distseq--1.6--1.7.sql
PGFILEDESC = "distseq - distributed integer sequences"

PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir)
SHLIB_LINK_INTERNAL = $(libpq)
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers
ifeq ($(CI),true)
PG_CFLAGS += -Werror
endif

REGRESS = distseq_upgrade distseq_basic distseq_errors distseq_stripes distseq_privileges distseq_callforms distseq_discard distseq_fuzz distseq_memory distseq_status_bounds distseq_parallel distseq_parity distseq_increate distseq_ownedby distseq_setval distseq_alter distseq_rows
REGRESS_OPTS = --temp-config=$(srcdir)/test/distseq.conf --temp-instance=./tmp_check

ISOLATION = concurrent_refill rollback_refill drop_recreate privilege_cache create_if_not_exists setval_blocks setval_snapshot setval_recreated lastval_dropped
ISOLATION_OPTS = --temp-config=$(srcdir)/test/distseq_iso.conf --temp-instance=./tmp_check_iso \
	--inputdir=$(srcdir)/test --outputdir=./output_iso

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = tmp_check tmp_check_iso output_iso results regression.diffs regression.out log

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object depends on the shared layout
$(OBJS): src/distseq.h src/compat.h

# objects built for another PostgreSQL are built again: the stamp is
# written, and so made newer than them, when PG_CONFIG names another one
ifneq ($(shell cat .built-for 2>/dev/null),$(PG_CONFIG))
$(shell echo '$(PG_CONFIG)' > .built-for)
endif
$(OBJS): .built-for
