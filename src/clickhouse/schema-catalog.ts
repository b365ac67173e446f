import { localTable, onCluster, table, type Layout } from './layout.js'
import type { TableSpec } from './schema.js'

/**
 * The catalog's tables (objects, tables, files, feedback, prices) in ClickHouse. Rows are never
 * updated in place: a change (a delete) is a newer row, and ReplacingMergeTree keeps the newest per
 * key (`updated_at`); reads take the newest with `FINAL` or argMax, as Weave's do.
 */
const TS = "DateTime64(6, 'UTC')"

export const OBJECT_VERSIONS: TableSpec = {
  name: 'object_versions',
  columns: [
    'project_id String',
    'kind LowCardinality(String)',
    'object_id String',
    'digest String',
    'base_object_class Nullable(String)',
    'leaf_object_class Nullable(String)',
    'refs Array(String)',
    'val_dump String CODEC(ZSTD(1))',
    'user_id Nullable(String)',
    `created_at ${TS}`,
    `deleted_at Nullable(${TS})`,
    `updated_at ${TS}`,
  ],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  orderBy: '(project_id, kind, object_id, digest)',
  shardBy: 'cityHash64(project_id, object_id)',
}

export const TABLES: TableSpec = {
  name: 'tables',
  columns: ['project_id String', 'digest String', 'row_digests Array(String)', `created_at ${TS}`],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, digest)',
  shardBy: 'cityHash64(project_id, digest)',
}

/** Content-addressed rows shared between tables (a table re-saved with one row changed stores one row). */
export const TABLE_ROWS: TableSpec = {
  name: 'table_rows',
  columns: ['project_id String', 'digest String', 'refs Array(String)', 'val_dump String CODEC(ZSTD(1))', `created_at ${TS}`],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, digest)',
  shardBy: 'cityHash64(project_id, digest)',
}

/** File bytes in chunks: a cluster has no shared disk to keep them on, as weft's embedded store does. */
export const FILES: TableSpec = {
  name: 'files',
  columns: [
    'project_id String',
    'digest String',
    'chunk_index UInt32',
    'n_chunks UInt32',
    'name String',
    'size_bytes UInt64',
    'val_bytes String CODEC(ZSTD(1))',
    `created_at ${TS}`,
  ],
  engine: 'ReplacingMergeTree',
  orderBy: '(project_id, digest, chunk_index)',
  shardBy: 'cityHash64(project_id, digest)',
}

export const FEEDBACK: TableSpec = {
  name: 'feedback',
  columns: [
    'project_id String',
    'weave_ref String',
    'id String',
    'wb_user_id String',
    'creator Nullable(String)',
    'feedback_type String',
    'payload_dump String CODEC(ZSTD(1))',
    'annotation_ref Nullable(String)',
    'runnable_ref Nullable(String)',
    'call_ref Nullable(String)',
    'trigger_ref Nullable(String)',
    `created_at ${TS}`,
    `deleted_at Nullable(${TS})`,
    `updated_at ${TS}`,
  ],
  engine: 'ReplacingMergeTree',
  version: 'updated_at',
  // A call's feedback is read by its ref: the ref leads the key after the project.
  orderBy: '(project_id, weave_ref, id)',
  shardBy: 'cityHash64(project_id)',
}

export const LLM_TOKEN_PRICES: TableSpec = {
  name: 'llm_token_prices',
  columns: [
    'id String',
    'pricing_level LowCardinality(String)',
    'pricing_level_id String',
    'provider_id String',
    'llm_id String',
    `effective_date ${TS}`,
    'prompt_token_cost Float64',
    'completion_token_cost Float64',
    'cache_read_input_token_cost Float64 DEFAULT 0',
    'cache_creation_input_token_cost Float64 DEFAULT 0',
    'prompt_token_cost_unit String',
    'completion_token_cost_unit String',
    'created_by Nullable(String)',
    `created_at ${TS}`,
  ],
  engine: 'MergeTree',
  orderBy: '(pricing_level, pricing_level_id, provider_id, llm_id, effective_date)',
  shardBy: 'cityHash64(pricing_level_id)',
}

/**
 * When a version was first created, kept through a delete and a re-create (which gives it a new `created_at`):
 * `version_index` is the rank by this time, computed on read, so concurrent writers never have to agree on a
 * counter and a re-created version keeps its index.
 */
export const OBJECT_FIRST_CREATED = `first_created_at ${TS}`

/** ALTER … ADD COLUMN for a table of a layout: on a cluster, its local tables and its Distributed one. */
export function addColumn(l: Layout, t: TableSpec, column: string): string[] {
  const add = (name: string) => `ALTER TABLE ${name}${onCluster(l)} ADD COLUMN IF NOT EXISTS ${column}`
  return l.cluster ? [add(localTable(l, t.name)), add(table(l, t.name))] : [add(table(l, t.name))]
}
