"""Django with distseq, as an application would use it (run by test/t/050_orm.pl).

A model with an ordinary BigAutoField; migration shop/0002_distseq hands its
default to distseq (distseq_create_for_column).  Then, through the ORM:
bulk_create, a fixture with explicit ids loaded by loaddata (as from another
process: another connection), distseq_setval above the fixture's ids, and
inserts again, with no IntegrityError.

Connection from the libpq environment: PGHOST, PGPORT, PGDATABASE, PGUSER.
"""
import os
import sys

import django
from django.conf import settings
from django.core.management import call_command
from django.db import IntegrityError, connections, transaction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

db = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ["PGDATABASE"],
    "USER": os.environ["PGUSER"],
    "HOST": os.environ["PGHOST"],
    "PORT": os.environ["PGPORT"],
}
# "default" runs the migrations and loaddata; "app" is the application's
# connection, which keeps the block of ids its backend holds throughout
settings.configure(
    DATABASES={"default": db, "app": dict(db)},
    INSTALLED_APPS=["shop"],
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    USE_TZ=True,
)
django.setup()

from shop.models import Order  # noqa: E402 (needs django.setup())


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        sys.exit(1)


call_command("migrate", "shop", verbosity=0)
with connections["default"].cursor() as c:
    c.execute("SELECT column_default FROM information_schema.columns"
              " WHERE table_name = 'shop_order' AND column_name = 'id'")
    default = c.fetchone()[0]
check(default == "distseq_nextval('shop_order_id'::text)",
      "migrate: the id's default is distseq_nextval (%s)" % default)

# bulk_create reads the ids back (INSERT ... RETURNING)
orders = Order.objects.using("app").bulk_create(
    [Order(item="bulk %d" % i) for i in range(5)])
ids = [o.id for o in orders]
check(ids == [1, 2, 3, 4, 5], "bulk_create got its ids from distseq: %s" % ids)

# a fixture with explicit ids, the next ones among them (6, 7, 8) and 5000
call_command("loaddata", "orders", database="default", verbosity=0)
check(Order.objects.using("app").filter(id__in=[6, 7, 8, 5000]).count() == 4,
      "loaddata inserted the fixture's ids")

# the sequence does not know: its next value is a fixture's id
try:
    with transaction.atomic(using="app"):
        Order.objects.using("app").create(item="before setval")
    collided = False
except IntegrityError:
    collided = True
check(collided, "before distseq_setval, an insert collides with the fixture")

# distseq_setval runs in a transaction of its own: not in atomic()
try:
    with transaction.atomic(using="default"):
        with connections["default"].cursor() as c:
            c.execute("SELECT distseq_setval('shop_order_id', 5000)")
    refused = None
except Exception as e:
    refused = str(e)
check(refused is not None and "cannot run inside a transaction block" in refused,
      "distseq_setval refuses transaction.atomic()")

# in Django's autocommit, it does
with connections["default"].cursor() as c:
    c.execute("SELECT distseq_setval('shop_order_id', (SELECT max(id) FROM shop_order))")
    print("distseq_setval returned %s" % c.fetchone()[0])

# the application's connection goes on, through the ORM
after = [Order.objects.using("app").create(item="after %d" % i) for i in range(3)]
after += Order.objects.using("app").bulk_create(
    [Order(item="bulk after %d" % i) for i in range(200)])
new_ids = [o.id for o in after]
check(min(new_ids) > 5000, "inserts after distseq_setval: ids %d to %d, above the fixture's"
      % (min(new_ids), max(new_ids)))
check(len(set(new_ids)) == len(new_ids), "all distinct")
check(Order.objects.using("app").count() == 5 + 4 + 203, "every row is there")
print("django: done")
