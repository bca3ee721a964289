"""subscription changes wait for their views; views remember being read

A subscription change no longer builds the buyer's new view before it commits
(issue 47): it is written as what the buyer wants (`subscription_requests`, and a
resume as `buyer_requests.wanted_status`) and a builder switches the buyer to it
once its view is ready (a `buyer_requests` row is the builder's to-do).
`view_reads` holds when a buyer last read each view: a view no buyer can read and
none ever read is dropped at once, the retention kept for views that were read.
Views kept from before count as read when they were built, so that an upgrade drops
nothing a buyer may come back to. New tables only: no column of an existing table
changes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""
from alembic import op
import sqlalchemy as sa


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'buyer_requests',
        sa.Column('buyer_id', sa.String(36), sa.ForeignKey('buyers.id'), primary_key=True),
        sa.Column('wanted_status', sa.String(20), nullable=True),
        sa.Column('requested_at', sa.DateTime(), nullable=False),
    )
    op.create_table(
        'subscription_requests',
        sa.Column('buyer_id', sa.String(36), sa.ForeignKey('buyers.id'), primary_key=True),
        sa.Column('feed_id', sa.String(36), sa.ForeignKey('feeds.id'), primary_key=True),
        sa.Column('status', sa.String(20), nullable=False),
        sa.Column('requested_at', sa.DateTime(), nullable=False),
    )
    op.create_table(
        'view_reads',
        sa.Column('view_id', sa.Integer(), primary_key=True),  # no foreign key: see schema.ViewRead
        sa.Column('read_at', sa.DateTime(), nullable=False),
    )
    op.execute('INSERT INTO view_reads (view_id, read_at) SELECT id, built_at FROM merged_views WHERE built_at IS NOT NULL')


def downgrade() -> None:
    op.drop_table('view_reads')
    op.drop_table('subscription_requests')
    op.drop_table('buyer_requests')
