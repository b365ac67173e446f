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
]
