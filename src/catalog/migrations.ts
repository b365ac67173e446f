/**
 * Catalog schema, in order. A migration is never edited once released: a change is a new entry.
 */
export interface Migration {
  version: number
  name: string
  statements: string[]
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'api_keys',
    statements: [
      `CREATE TABLE api_keys (
        id VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL,
        -- NULL: every entity; otherwise the entities this key may read and write.
        entities VARCHAR[],
        is_admin BOOLEAN NOT NULL,
        -- SHA-256 of the whole key; the key itself is never stored.
        key_hash BLOB NOT NULL UNIQUE,
        key_prefix VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL,
        revoked_at TIMESTAMP
      )`,
    ],
  },
  {
    version: 2,
    name: 'objects_and_files',
    statements: [
      `CREATE TABLE objects (
        project_id VARCHAR NOT NULL,
        object_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        -- 0-based rank among every version of the object ever created, deleted ones included.
        version_index INTEGER NOT NULL,
        kind VARCHAR NOT NULL,
        base_object_class VARCHAR,
        leaf_object_class VARCHAR,
        val_dump VARCHAR NOT NULL,
        user_id VARCHAR,
        created_at TIMESTAMP NOT NULL,
        deleted_at TIMESTAMP,
        PRIMARY KEY (project_id, object_id, digest)
      )`,
      `CREATE TABLE files (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        content BLOB NOT NULL,
        size_bytes BIGINT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (project_id, digest)
      )`,
    ],
  },
  {
    version: 3,
    name: 'llm_token_prices',
    statements: [
      // Project prices (docs/statistics.md); the default book lives in assets/prices.json.
      `CREATE TABLE llm_token_prices (
        id VARCHAR PRIMARY KEY,
        pricing_level VARCHAR NOT NULL,
        pricing_level_id VARCHAR NOT NULL,
        provider_id VARCHAR NOT NULL,
        llm_id VARCHAR NOT NULL,
        effective_date TIMESTAMP NOT NULL,
        prompt_token_cost DOUBLE NOT NULL,
        completion_token_cost DOUBLE NOT NULL,
        cache_read_input_token_cost DOUBLE NOT NULL,
        cache_creation_input_token_cost DOUBLE NOT NULL,
        prompt_token_cost_unit VARCHAR NOT NULL,
        completion_token_cost_unit VARCHAR NOT NULL,
        created_by VARCHAR,
        created_at TIMESTAMP NOT NULL
      )`,
    ],
  },
  {
    version: 4,
    name: 'tables',
    statements: [
      // Rows are content-addressed and shared between tables: a table re-saved with one row changed stores one row.
      `CREATE TABLE table_rows (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        val_dump VARCHAR NOT NULL,
        PRIMARY KEY (project_id, digest)
      )`,
      `CREATE TABLE tables (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        -- In order, duplicates kept.
        row_digests VARCHAR[] NOT NULL,
        created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (project_id, digest)
      )`,
    ],
  },
  {
    version: 5,
    name: 'feedback',
    statements: [
      // Feedback on calls and objects (docs/feedback.md); the payload is kept as the JSON text.
      `CREATE TABLE feedback (
        project_id VARCHAR NOT NULL,
        id VARCHAR NOT NULL,
        weave_ref VARCHAR NOT NULL,
        wb_user_id VARCHAR NOT NULL,
        creator VARCHAR,
        created_at TIMESTAMP NOT NULL,
        feedback_type VARCHAR NOT NULL,
        payload_dump VARCHAR NOT NULL,
        annotation_ref VARCHAR,
        runnable_ref VARCHAR,
        call_ref VARCHAR,
        trigger_ref VARCHAR,
        PRIMARY KEY (project_id, id)
      )`,
    ],
  },
]
