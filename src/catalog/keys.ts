import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { blobValue, listValue } from '@duckdb/node-api'
import type { Catalog } from './db.js'

import { canAccess, type Principal } from '../core/principal.js'

export { canAccess, type Principal }

export interface KeyInfo extends Principal {
  prefix: string
  createdAt: string
  revokedAt: string | null
}

export interface NewKey {
  name?: string
  userId: string
  entities?: string[] | null
  isAdmin?: boolean
}

interface Entry {
  hash: Buffer
  principal: Principal
}

const KEY_PREFIX = 'weft_'
const ENTITY_NAME = /^[A-Za-z0-9_.-]{1,128}$/
const USER_ID = /^[A-Za-z0-9_.@-]{1,128}$/

export class KeyError extends Error {}

function hashKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest()
}

/**
 * API keys. Only SHA-256 hashes are stored. Active keys are held in memory indexed by that hash,
 * so verifying a request costs one hash and one map lookup and touches no database. The index is
 * keyed by a one-way hash of the secret, so how long a lookup takes reveals nothing about the
 * secret; the final comparison of the stored hash is constant-time all the same.
 */
export class KeyStore {
  private readonly active = new Map<string, Entry>()

  private constructor(private readonly catalog: Catalog) {}

  static async load(catalog: Catalog): Promise<KeyStore> {
    const ks = new KeyStore(catalog)
    const rows = await catalog.all<Row>(
      'SELECT id, name, user_id, entities, is_admin, key_hash, key_prefix, created_at, revoked_at FROM api_keys WHERE revoked_at IS NULL',
    )
    for (const r of rows) ks.index(r)
    return ks
  }

  private index(r: Row): void {
    const info = toInfo(r)
    const hash = Buffer.from(r.key_hash)
    this.active.set(hash.toString('hex'), { hash, principal: principalOf(info) })
  }

  get activeCount(): number {
    return this.active.size
  }

  verify(key: string): Principal | null {
    if (key.length === 0 || key.length > 512) return null
    const hash = hashKey(key)
    const e = this.active.get(hash.toString('hex'))
    if (!e || !timingSafeEqual(e.hash, hash)) return null
    return e.principal
  }

  /** Creates a key; the returned secret is shown once and never again. */
  async create(spec: NewKey, secret?: string): Promise<{ key: string; info: KeyInfo }> {
    validate(spec)
    const key = secret ?? KEY_PREFIX + randomBytes(24).toString('base64url')
    const id = 'key_' + randomBytes(6).toString('hex')
    const hash = hashKey(key)
    if (this.active.has(hash.toString('hex'))) throw new KeyError('that key already exists')
    const row: Row = {
      id,
      name: spec.name ?? '',
      user_id: spec.userId,
      entities: spec.entities ?? null,
      is_admin: spec.isAdmin ?? false,
      key_hash: hash,
      key_prefix: key.slice(0, Math.min(9, Math.max(1, key.length - 8))),
      created_at: new Date().toISOString(),
      revoked_at: null,
    }
    await this.catalog.run(
      `INSERT INTO api_keys (id, name, user_id, entities, is_admin, key_hash, key_prefix, created_at, revoked_at)
       VALUES ($1, $2, $3, $4::VARCHAR[], $5, $6::BLOB, $7, $8::TIMESTAMP, NULL)`,
      [
        row.id,
        row.name,
        row.user_id,
        row.entities === null ? null : listValue(row.entities),
        row.is_admin,
        blobValue(new Uint8Array(hash)),
        row.key_prefix,
        row.created_at as string,
      ],
    )
    this.index(row)
    return { key, info: toInfo(row) }
  }

  /** Makes sure a configured key (WEFT_API_KEY) exists as an admin key; a no-op when it does. */
  async ensureAdmin(key: string, userId = 'admin'): Promise<Principal> {
    const existing = this.verify(key)
    if (existing) return existing
    const { info } = await this.create({ name: 'WEFT_API_KEY', userId, isAdmin: true }, key)
    return principalOf(info)
  }

  async list(): Promise<KeyInfo[]> {
    const rows = await this.catalog.all<Row>(
      'SELECT id, name, user_id, entities, is_admin, key_hash, key_prefix, created_at, revoked_at FROM api_keys ORDER BY created_at, id',
    )
    return rows.map(toInfo)
  }

  /** Revokes by key id; returns the key as it now is, or null for an unknown id. */
  async revoke(id: string): Promise<KeyInfo | null> {
    const [row] = await this.catalog.all<Row>(
      'SELECT id, name, user_id, entities, is_admin, key_hash, key_prefix, created_at, revoked_at FROM api_keys WHERE id = $1',
      [id],
    )
    if (!row) return null
    if (row.revoked_at === null) {
      const now = new Date().toISOString()
      await this.catalog.run('UPDATE api_keys SET revoked_at = $2::TIMESTAMP WHERE id = $1', [id, now])
      row.revoked_at = now
      this.active.delete(Buffer.from(row.key_hash).toString('hex'))
    }
    return toInfo(row)
  }
}

/** The file in the data dir that keeps the admin key the first start created. */
export const ADMIN_KEY_FILE = 'admin-key'

/**
 * Keeps the first admin key in `<dataDir>/admin-key` (the key and a newline), so it outlives the
 * terminal it was printed in. The file is created with mode 0600 in the same call that creates it
 * (O_EXCL), so it is never readable by others, not even for a moment; an existing file is never
 * overwritten. Returns the file's path, or undefined when a file of that name was there already.
 */
export async function saveFirstAdminKey(dataDir: string, key: string): Promise<string | undefined> {
  const file = path.join(dataDir, ADMIN_KEY_FILE)
  try {
    await fs.writeFile(file, key + '\n', { mode: 0o600, flag: 'wx' })
    return file
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return undefined
    throw e
  }
}

function validate(spec: NewKey): void {
  if (!USER_ID.test(spec.userId)) throw new KeyError(`user id must match ${USER_ID}`)
  if (spec.name !== undefined && spec.name.length > 200) throw new KeyError('name must be at most 200 characters')
  if (spec.entities) {
    if (spec.entities.length === 0) throw new KeyError('entities must list at least one entity (omit it for all)')
    for (const e of spec.entities) if (!ENTITY_NAME.test(e)) throw new KeyError(`entity ${JSON.stringify(e)} must match ${ENTITY_NAME}`)
  }
}

interface Row {
  id: string
  name: string
  user_id: string
  entities: string[] | null
  is_admin: boolean
  key_hash: Uint8Array
  key_prefix: string
  created_at: string | Date
  revoked_at: string | Date | null
}

function iso(v: string | Date | null): string | null {
  if (v === null) return null
  if (v instanceof Date) return v.toISOString()
  return new Date(v.endsWith('Z') ? v : v.replace(' ', 'T') + 'Z').toISOString()
}

function toInfo(r: Row): KeyInfo {
  return {
    keyId: r.id,
    name: r.name,
    userId: r.user_id,
    entities: r.entities ? [...r.entities] : null,
    isAdmin: r.is_admin,
    prefix: r.key_prefix,
    createdAt: iso(r.created_at)!,
    revokedAt: iso(r.revoked_at),
  }
}

function principalOf(i: KeyInfo): Principal {
  return { keyId: i.keyId, name: i.name, userId: i.userId, entities: i.entities, isAdmin: i.isAdmin }
}
