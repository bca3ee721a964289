"""record name keys

Each record keeps the normalised name of its vessel (C2.2) as `name_key`, also when it
has an IMO number, so that the upkeep of a kept view finds the IMO numbers a name
carries (issue 19 rule 1) by index instead of reading every record. Existing records
get theirs here, once per distinct vessel name.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

from store.normalize import name_key  # C2.2's normal form, which the records keep


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name_key', sa.String(length=210), nullable=True))
        batch_op.create_index('ix_records_feed_name', ['feed_id', 'name_key'], unique=False)
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, vessel_name FROM records WHERE vessel_name IS NOT NULL")).all()
    keys: dict[str, str | None] = {}
    updates = []
    for record_id, name in rows:  # by primary key: vessel_name has no index
        if name not in keys:
            keys[name] = name_key(name)
        if keys[name]:
            updates.append({"id": record_id, "key": keys[name]})
    for start in range(0, len(updates), 50_000):
        bind.execute(sa.text("UPDATE records SET name_key = :key WHERE id = :id"), updates[start : start + 50_000])


def downgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.drop_index('ix_records_feed_name')
        batch_op.drop_column('name_key')
