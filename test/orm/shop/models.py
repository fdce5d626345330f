from django.db import models


class Order(models.Model):
    # An AutoField as Django makes it (bigserial); migration 0002 hands its
    # default over to distseq.  Django still sees an AutoField: it leaves the
    # id out of INSERTs and reads it back with RETURNING.
    id = models.BigAutoField(primary_key=True)
    item = models.TextField()
