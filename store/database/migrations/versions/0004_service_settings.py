"""service settings

Settings of the service that every command and server process must agree on, kept
in the store: the public base URL that share-link URLs are made with (issue 18.6).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 23:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('service_settings',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.Column('changed_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )


def downgrade() -> None:
    op.drop_table('service_settings')
