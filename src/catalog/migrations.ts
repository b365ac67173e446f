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
  {
    version: 6,
    name: 'files_on_disk',
    statements: [
      // File bytes move to <data dir>/files (catalog/files.ts); `files` keeps the metadata. A NULL content means
      // the bytes are on disk; rows from before still hold theirs until the first start carries them over.
      `ALTER TABLE files ALTER COLUMN content DROP NOT NULL`,
    ],
  },
  {
    version: 7,
    name: 'table_chunks',
    statements: [
      // Rows get an insertion number: a page reads its rows by it through a small index instead of hashing
      // every digest of the project (docs/tables.md). The table is copied rather than altered: DuckDB builds no
      // index on a column added in the same transaction, and UNIQUE gives `seq` its index.
      `CREATE SEQUENCE table_row_seq`,
      `CREATE TABLE table_rows_v7 (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        val_dump VARCHAR NOT NULL,
        seq BIGINT NOT NULL UNIQUE DEFAULT nextval('table_row_seq'),
        PRIMARY KEY (project_id, digest)
      )`,
      `INSERT INTO table_rows_v7 (project_id, digest, val_dump) SELECT project_id, digest, val_dump FROM table_rows ORDER BY rowid`,
      `DROP TABLE table_rows`,
      `ALTER TABLE table_rows_v7 RENAME TO table_rows`,
      // A table's row list is kept in content-addressed chunks shared between tables, so appending a chunk to a
      // big table writes the new chunk and a short list of chunk digests, not the whole list again.
      `CREATE TABLE table_chunks (
        project_id VARCHAR NOT NULL,
        -- Hex SHA-256 of the chunk's row digests concatenated (a chunk digests as a table of its rows).
        digest VARCHAR NOT NULL,
        row_digests VARCHAR[] NOT NULL,
        -- table_rows.seq of each row, in the same order.
        row_seqs BIGINT[] NOT NULL,
        PRIMARY KEY (project_id, digest)
      )`,
      `INSERT INTO table_chunks
        SELECT u.project_id, u.digest, list(u.d ORDER BY u.i), list(r.seq ORDER BY u.i)
        FROM (SELECT project_id, digest, unnest(row_digests) AS d, generate_subscripts(row_digests, 1) AS i FROM tables) u
        JOIN table_rows r ON r.project_id = u.project_id AND r.digest = u.d
        GROUP BY u.project_id, u.digest`,
      `CREATE TABLE table_lists (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        n_rows BIGINT NOT NULL,
        -- The table is its chunks' rows in this order; chunk_starts[k] is the position of chunk k's first row.
        chunk_digests VARCHAR[] NOT NULL,
        chunk_starts BIGINT[] NOT NULL,
        created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (project_id, digest)
      )`,
      `INSERT INTO table_lists SELECT project_id, digest, len(row_digests),
        CASE WHEN len(row_digests) = 0 THEN []::VARCHAR[] ELSE [digest] END,
        CASE WHEN len(row_digests) = 0 THEN []::BIGINT[] ELSE [0::BIGINT] END, created_at FROM tables`,
      `DROP TABLE tables`,
    ],
  },
  {
    version: 8,
    name: 'objects_is_latest',
    statements: [
      // Which version of each object is latest, kept on write (catalog/objects.ts) rather than ranked on every
      // /objs/query. (DuckDB adds no column with a NOT NULL constraint; NULL reads as false.)
      `ALTER TABLE objects ADD COLUMN is_latest BOOLEAN DEFAULT false`,
      `UPDATE objects SET is_latest = true FROM (SELECT project_id AS p, object_id AS o, arg_max(digest, (created_at, version_index)) AS d
        FROM objects WHERE deleted_at IS NULL GROUP BY project_id, object_id) l
        WHERE project_id = l.p AND object_id = l.o AND digest = l.d`,
    ],
  },
  {
    version: 9,
    name: 'table_rows_without_key',
    statements: [
      // The `(project_id, digest)` key is dropped: no lookup used it (DuckDB plans a scan of the project's digests
      // for `digest IN …` with or without it), yet every appended row was checked against it on the event loop
      // and its index grew and was rewritten at each checkpoint. Rows stay stored once per project and digest
      // because writes are serialised and each asks the project's row index first (table-row-index.ts). DuckDB
      // drops no constraint in place, so the table is copied as in version 7, seqs and their order kept.
      `CREATE TABLE table_rows_v9 (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        val_dump VARCHAR NOT NULL,
        seq BIGINT NOT NULL UNIQUE DEFAULT nextval('table_row_seq')
      )`,
      `INSERT INTO table_rows_v9 SELECT project_id, digest, val_dump, seq FROM table_rows ORDER BY seq`,
      `DROP TABLE table_rows`,
      `ALTER TABLE table_rows_v9 RENAME TO table_rows`,
    ],
  },
  {
    version: 10,
    name: 'table_chunks_without_key',
    statements: [
      // The `(project_id, digest)` key of table_chunks is dropped: with it, the commit of a dataset chunk's append
      // took 0.2-2 s once the catalog held 2M rows (250 chunk lists of 8,192 entries), against 12-23 ms for the same
      // append to a copy without the key (DuckDB 1.5, same file) - most of an append's time, growing with the
      // catalog. A chunk is read by a scan of the chunks' digests as fast as through the key (~3 ms either way at
      // 390 chunks). Chunks stay stored once per project and digest because writes are serialised and each asks
      // which of its chunks are stored first (table-chunks.ts, writeChunks).
      `CREATE TABLE table_chunks_v10 (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        row_digests VARCHAR[] NOT NULL,
        row_seqs BIGINT[] NOT NULL
      )`,
      `INSERT INTO table_chunks_v10 SELECT project_id, digest, row_digests, row_seqs FROM table_chunks ORDER BY rowid`,
      `DROP TABLE table_chunks`,
      `ALTER TABLE table_chunks_v10 RENAME TO table_chunks`,
    ],
  },
  {
    version: 11,
    name: 'table_rows_compression',
    statements: [
      // Each text column's compression named once instead of chosen by DuckDB's analysis of every row group: FSST
      // for the rows' JSON (a row's text rarely repeats within a row group, so a dictionary does not pay, and the
      // analysis stored segments uncompressed that FSST shrinks: 47.7 MB of base64 rows took 50.3 MB against 45.6,
      // CJK text 45.6 against 38.5) and none for the digests (43 random characters each). 10,000 bench rows of ~1 KB
      // then insert in 59-71 ms against 72-95 (bench/README.md, 2026-12-06). Copied as in version 9, seqs and their
      // order kept.
      `CREATE TABLE table_rows_v11 (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL USING COMPRESSION uncompressed,
        val_dump VARCHAR NOT NULL USING COMPRESSION fsst,
        seq BIGINT NOT NULL UNIQUE DEFAULT nextval('table_row_seq')
      )`,
      `INSERT INTO table_rows_v11 SELECT project_id, digest, val_dump, seq FROM table_rows ORDER BY seq`,
      `DROP TABLE table_rows`,
      `ALTER TABLE table_rows_v11 RENAME TO table_rows`,
    ],
  },
  {
    version: 12,
    name: 'table_chunks_as_text',
    statements: [
      // A chunk's row digests and seqs as comma-joined text instead of lists: DuckDB (1.5) logged, at each commit
      // that appended a chunk row, the lists of every chunk row before it again, so the log grew by ~0.5 MB more per
      // 10,000-row dataset chunk (16 MB a commit at 300k rows, a 256 MB checkpoint every few commits at 1M); with
      // text the log takes the new rows only (table-chunks.ts). Copied as in version 10, order kept.
      `CREATE TABLE table_chunks_v12 (
        project_id VARCHAR NOT NULL,
        digest VARCHAR NOT NULL,
        row_digests VARCHAR NOT NULL,
        row_seqs VARCHAR NOT NULL
      )`,
      `INSERT INTO table_chunks_v12
        SELECT project_id, digest, array_to_string(row_digests, ','), array_to_string(row_seqs, ',') FROM table_chunks ORDER BY rowid`,
      `DROP TABLE table_chunks`,
      `ALTER TABLE table_chunks_v12 RENAME TO table_chunks`,
    ],
  },
]
