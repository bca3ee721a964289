"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-23
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('buyers',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('commodity_mappings',
    sa.Column('raw_key', sa.String(length=220), nullable=False),
    sa.Column('raw', sa.String(length=200), nullable=False),
    sa.Column('leaf_id', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('raw_key')
    )
    op.create_table('feeds',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('frequency', sa.String(length=50), nullable=True),
    sa.Column('feed_type', sa.String(length=50), nullable=True),
    sa.Column('coverage_rating', sa.Float(), nullable=True),
    sa.Column('commodity_rating', sa.Float(), nullable=True),
    sa.Column('commercial_rating', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('data_version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('ports',
    sa.Column('unlocode', sa.String(length=5), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('country_code', sa.String(length=2), nullable=False),
    sa.Column('country_name', sa.String(length=120), nullable=False),
    sa.Column('latitude', sa.Float(), nullable=True),
    sa.Column('longitude', sa.Float(), nullable=True),
    sa.Column('timezone', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('unlocode')
    )
    op.create_table('api_keys',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('buyer_id', sa.String(length=36), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_used_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['buyer_id'], ['buyers.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key_hash')
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_buyer_id'), ['buyer_id'], unique=False)

    op.create_table('feed_ports',
    sa.Column('feed_id', sa.String(length=36), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('unlocode', sa.String(length=5), nullable=False),
    sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'], ),
    sa.ForeignKeyConstraint(['unlocode'], ['ports.unlocode'], ),
    sa.PrimaryKeyConstraint('feed_id', 'position')
    )
    op.create_table('records',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('feed_id', sa.String(length=36), nullable=False),
    sa.Column('ref', sa.String(length=200), nullable=False),
    sa.Column('port_unlocode', sa.String(length=5), nullable=False),
    sa.Column('port_name', sa.String(length=200), nullable=True),
    sa.Column('country_name', sa.String(length=200), nullable=True),
    sa.Column('berth_terminal', sa.String(length=200), nullable=True),
    sa.Column('vessel_imo', sa.String(length=7), nullable=True),
    sa.Column('vessel_name', sa.String(length=200), nullable=True),
    sa.Column('vessel_type', sa.String(length=100), nullable=True),
    sa.Column('dwt', sa.Integer(), nullable=True),
    sa.Column('operation', sa.String(length=20), nullable=True),
    sa.Column('commodity', sa.String(length=200), nullable=True),
    sa.Column('quantity', sa.Float(), nullable=True),
    sa.Column('quantity_unit', sa.String(length=10), nullable=True),
    sa.Column('eta', sa.DateTime(), nullable=True),
    sa.Column('etb', sa.DateTime(), nullable=True),
    sa.Column('etd', sa.DateTime(), nullable=True),
    sa.Column('vessel_status', sa.String(length=20), nullable=True),
    sa.Column('shipper', sa.String(length=200), nullable=True),
    sa.Column('receiver', sa.String(length=200), nullable=True),
    sa.Column('charterer', sa.String(length=200), nullable=True),
    sa.Column('operator', sa.String(length=200), nullable=True),
    sa.Column('ship_agent', sa.String(length=200), nullable=True),
    sa.Column('vessel_key', sa.String(length=220), nullable=False),
    sa.Column('commodity_raw_key', sa.String(length=220), nullable=True),
    sa.Column('commodity_leaf', sa.String(length=200), nullable=True),
    sa.Column('content_hash', sa.BigInteger(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('feed_id', 'ref', name='uq_records_feed_ref')
    )
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.create_index('ix_records_commodity_raw_key', ['commodity_raw_key'], unique=False)

    op.create_table('share_links',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('buyer_id', sa.String(length=36), nullable=False),
    sa.Column('filters', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_used_at', sa.DateTime(), nullable=True),
    sa.Column('use_count', sa.Integer(), nullable=False),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.Column('label', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['buyer_id'], ['buyers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('share_links', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_share_links_buyer_id'), ['buyer_id'], unique=False)

    op.create_table('subscriptions',
    sa.Column('buyer_id', sa.String(length=36), nullable=False),
    sa.Column('feed_id', sa.String(length=36), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('changed_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['buyer_id'], ['buyers.id'], ),
    sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'], ),
    sa.PrimaryKeyConstraint('buyer_id', 'feed_id')
    )
    op.create_table('record_revisions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('record_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('content', sa.JSON(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('replaced_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['record_id'], ['records.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('record_revisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_record_revisions_record_id'), ['record_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('record_revisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_record_revisions_record_id'))

    op.drop_table('record_revisions')
    op.drop_table('subscriptions')
    with op.batch_alter_table('share_links', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_share_links_buyer_id'))

    op.drop_table('share_links')
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.drop_index('ix_records_commodity_raw_key')

    op.drop_table('records')
    op.drop_table('feed_ports')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_buyer_id'))

    op.drop_table('api_keys')
    op.drop_table('ports')
    op.drop_table('feeds')
    op.drop_table('commodity_mappings')
    op.drop_table('buyers')
