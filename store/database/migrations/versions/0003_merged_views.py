"""merged views kept in the database

Merged rows become data (issue 15): `merged_views` (one kept merge per mode and feed
set), `merged_rows` (its rows, keyed for keyset pages), `vessel_changes` (which
(vessel, port) pairs each change of a feed touched, so that views merge again only
those), and an
index of records by feed and vessel key for those partial merges. Existing stores get
no views: each is built the first time a buyer needs it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

_ID = sa.String(24).with_variant(sa.String(24, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table('merged_views',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('mode', sa.String(length=10), nullable=False),
    sa.Column('feed_set', sa.String(length=64), nullable=False),
    sa.Column('feeds', sa.JSON(), nullable=False),
    sa.Column('versions', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=10), nullable=False),
    sa.Column('max_span', sa.BigInteger(), nullable=False),
    sa.Column('row_count', sa.Integer(), nullable=False),
    sa.Column('claimed_at', sa.DateTime(), nullable=True),
    sa.Column('built_at', sa.DateTime(), nullable=True),
    sa.Column('unused_since', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('mode', 'feed_set', name='uq_merged_views_mode_set')
    )
    text = {name: sa.String(length=200) for name in (
        'port_name', 'country_name', 'berth_terminal', 'vessel_name', 'commodity', 'commodity_normalized',
        'commodity_normalized_group', 'commodity_normalized_subgroup', 'shipper', 'receiver', 'charterer',
        'operator', 'ship_agent', 'country_key', 'port_name_key')}
    op.create_table('merged_rows',
    sa.Column('view_id', sa.Integer(), nullable=False),
    sa.Column('sort_key', sa.BigInteger(), nullable=False),
    sa.Column('id', _ID, nullable=False),
    sa.Column('source_id', sa.Text(), nullable=False),
    sa.Column('source_name', sa.Text(), nullable=False),
    sa.Column('port_unlocode', sa.String(length=5), nullable=False),
    sa.Column('port_name', text['port_name'], nullable=True),
    sa.Column('country_name', text['country_name'], nullable=True),
    sa.Column('berth_terminal', text['berth_terminal'], nullable=True),
    sa.Column('vessel_imo', sa.String(length=7), nullable=True),
    sa.Column('vessel_name', text['vessel_name'], nullable=True),
    sa.Column('vessel_type', sa.String(length=100), nullable=True),
    sa.Column('dwt', sa.BigInteger(), nullable=True),
    sa.Column('operation', sa.String(length=20), nullable=True),
    sa.Column('commodity', text['commodity'], nullable=True),
    sa.Column('commodity_normalized', text['commodity_normalized'], nullable=True),
    sa.Column('commodity_normalized_group', text['commodity_normalized_group'], nullable=True),
    sa.Column('commodity_normalized_subgroup', text['commodity_normalized_subgroup'], nullable=True),
    sa.Column('quantity', sa.Float(), nullable=True),
    sa.Column('quantity_unit', sa.String(length=10), nullable=True),
    sa.Column('eta', sa.BigInteger(), nullable=True),
    sa.Column('etb', sa.BigInteger(), nullable=True),
    sa.Column('etd', sa.BigInteger(), nullable=True),
    sa.Column('combined_date', sa.BigInteger(), nullable=True),
    sa.Column('vessel_status', sa.String(length=20), nullable=True),
    sa.Column('shipper', text['shipper'], nullable=True),
    sa.Column('receiver', text['receiver'], nullable=True),
    sa.Column('charterer', text['charterer'], nullable=True),
    sa.Column('operator', text['operator'], nullable=True),
    sa.Column('ship_agent', text['ship_agent'], nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.BigInteger(), nullable=False),
    sa.Column('vessel_key', sa.String(length=220), nullable=False),
    sa.Column('commodity_key', sa.String(length=220), nullable=False),
    sa.Column('span_end', sa.BigInteger(), nullable=True),
    sa.Column('country_key', text['country_key'], nullable=True),
    sa.Column('port_name_key', text['port_name_key'], nullable=True),
    sa.Column('members', sa.Integer(), nullable=False),
    sa.Column('is_top', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['view_id'], ['merged_views.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('view_id', 'sort_key', 'id'),
    sqlite_with_rowid=False,
    )
    op.create_index('ix_merged_rows_port', 'merged_rows', ['view_id', 'port_unlocode', 'sort_key', 'id'])
    op.create_index('ix_merged_rows_country', 'merged_rows', ['view_id', 'country_key', 'sort_key', 'id'])
    op.create_index('ix_merged_rows_commodity', 'merged_rows', ['view_id', 'commodity_normalized', 'sort_key', 'id'])
    op.create_index('ix_merged_rows_vessel', 'merged_rows', ['view_id', 'vessel_key', 'port_unlocode'])
    op.create_index('ix_merged_rows_top', 'merged_rows', ['view_id', 'is_top', 'sort_key', 'id'])
    op.create_table('vessel_changes',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('feed_id', sa.String(length=36), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('vessel_key', sa.String(length=220), nullable=True),
    sa.Column('port_unlocode', sa.String(length=5), nullable=True),
    sa.ForeignKeyConstraint(['feed_id'], ['feeds.id']),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_vessel_changes_feed_version', 'vessel_changes', ['feed_id', 'version'])
    op.create_index('ix_records_feed_vessel', 'records', ['feed_id', 'vessel_key'])


def downgrade() -> None:
    op.drop_index('ix_records_feed_vessel', table_name='records')
    op.drop_table('vessel_changes')
    op.drop_table('merged_rows')
    op.drop_table('merged_views')
