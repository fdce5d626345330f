from django.db import migrations

# The table's ids come from distseq from here on: distseq_create_for_column
# creates the distseq sequence "shop_order_id", starting above the ids the
# table has, and sets the column's default to distseq_nextval.
# if_not_exists: a database where it ran already (or a restored one) is
# left as it is.  Rows inserted through that default must wait for the
# migration's transaction to commit (a sequence cannot be drawn from before
# its creation committed): insert them in a later migration.
class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [
        migrations.RunSQL(
            sql="SELECT distseq_create_for_column('shop_order', 'id', if_not_exists => true)",
            reverse_sql="ALTER TABLE shop_order ALTER COLUMN id DROP DEFAULT; "
                        "SELECT distseq_drop('shop_order_id')",
        ),
    ]
