"""SQLAlchemy 1.4 with distseq (run by test/t/050_orm.pl).

The key column's server_default is distseq_nextval: the ORM leaves the id
out of its INSERTs and reads it back with RETURNING (inserted_primary_key,
a flush, insert().returning()).  The distseq sequence is created with the
table, by a DDL event.

Connection from the libpq environment: PGHOST, PGPORT, PGDATABASE, PGUSER.
"""
import sys

from sqlalchemy import (DDL, BigInteger, Column, Text, create_engine, event,
                        insert, select, text)
from sqlalchemy.orm import Session, declarative_base

Base = declarative_base()


class Order(Base):
    __tablename__ = "sa_orders"
    id = Column(BigInteger, primary_key=True,
                server_default=text("distseq_nextval('sa_orders')"))
    item = Column(Text)


event.listen(Order.__table__, "before_create",
             DDL("SELECT distseq_create('sa_orders', if_not_exists => true)"))


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        sys.exit(1)


# an empty URL: psycopg2 (libpq) reads the PG* environment variables
engine = create_engine("postgresql+psycopg2://", future=True)
Base.metadata.create_all(engine)

with engine.connect() as conn:
    default = conn.execute(text(
        "SELECT column_default FROM information_schema.columns"
        " WHERE table_name = 'sa_orders' AND column_name = 'id'")).scalar()
check(default == "distseq_nextval('sa_orders'::text)",
      "create_all: the id's default is distseq_nextval, no serial (%s)" % default)

with engine.begin() as conn:
    r = conn.execute(insert(Order.__table__).values(item="core"))
    first = r.inserted_primary_key[0]
    rows = conn.execute(insert(Order.__table__).returning(Order.__table__.c.id),
                        [{"item": "core %d" % i} for i in range(3)]).all()
check(first == 1, "inserted_primary_key: %s" % first)
check([r.id for r in rows] == [2, 3, 4], "insert().returning(): %s" % [r.id for r in rows])

with Session(engine) as session:
    objs = [Order(item="orm %d" % i) for i in range(100)]
    session.add_all(objs)
    session.flush()
    ids = [o.id for o in objs]
    session.commit()
check(ids == list(range(5, 105)), "a flush of 100 objects got ids 5 to 104")

# rows with explicit ids (an import), then distseq_setval above them; it
# runs in a transaction of its own, so not in engine.begin()'s block
with engine.begin() as conn:
    conn.execute(insert(Order.__table__),
                 [{"id": 105 + i, "item": "imported"} for i in range(5)]
                 + [{"id": 50000, "item": "imported"}])
try:
    with engine.begin() as conn:
        conn.execute(text("SELECT distseq_setval('sa_orders', 50000)"))
    refused = None
except Exception as e:
    refused = str(e)
check(refused is not None and "cannot run inside a transaction block" in refused,
      "distseq_setval refuses engine.begin()'s transaction block")
with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
    conn.execute(text("SELECT distseq_setval('sa_orders', (SELECT max(id) FROM sa_orders))"))
check(True, "distseq_setval in an AUTOCOMMIT connection")

with Session(engine) as session:
    objs = [Order(item="after %d" % i) for i in range(10)]
    session.add_all(objs)
    session.commit()
    ids = [o.id for o in objs]
check(min(ids) > 50000, "inserts after distseq_setval: ids %d to %d" % (min(ids), max(ids)))

with Session(engine) as session:
    n, d = session.execute(select(text("count(*), count(DISTINCT id) FROM sa_orders"))).one()
check(n == d == 120, "120 rows, 120 distinct ids")
print("sqlalchemy: done")
