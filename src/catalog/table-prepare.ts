import { createHash } from 'node:crypto'
import { canAccess } from '../core/principal.js'
import { DomainError, validationError, type Detail } from '../core/errors.js'
import { parseJson } from '../core/json.js'
import { compileValidator } from '../schemas/validate.js'
import {
  TableCreateFromDigestsReqSchema,
  TableCreateReqSchema,
  TableUpdateReqSchema,
  type TableCreateFromDigestsReq,
  type TableCreateReq,
  type TableUpdateReq,
  type TableUpdateSpec,
} from '../schemas/tables.js'
import { checkCount, checkExpected, MAX_REQUEST_ROWS, MAX_TABLE_ROWS, toStored } from './table-rules.js'
import type { AsciiTexts } from './table-chunks.js'
import { DIGEST, splitTexts } from './table-texts.js'
import { checkJsonShape } from '../core/json-shape.js'
import { scanTableBody, type PackedRows, type ScannedBody } from './table-scan.js'
import { scanDigestList } from './table-scan-digests.js'

/**
 * The CPU-heavy part of `/table/create` and `/table/update`, run in a worker thread (workers/tables.ts) so the event
 * loop only does the catalog write: parse the body, validate it, check the key may write the project, and digest
 * every row (digest.ts, so the SDK's client-side digests match). A 10 MB chunk is ~300-500 ms of this on one core.
 * `/table/create_from_digests` comes here too: the Python SDK's last request for a big dataset lists every row's
 * digest (1M rows: 46 MB of JSON), parsed here and sent back as one buffer. The answer is plain data (it crosses
 * a thread boundary); errors come back as values, not throws.
 */
export interface TableTask {
  route: 'create' | 'update' | 'digests'
  body: Uint8Array
  /** The key's entities; null: all. */
  entities: string[] | null
}

/**
 * Row i of a request: its digest and the compact JSON text stored for it (update i of an update; '' for pops). An
 * update's `updates` are null when every one is an append: the rows are appended in order.
 */
export interface PreparedRows {
  digests: string[]
  texts: string[]
}

/**
 * The rows as they cross back from the worker: the texts as strings (the whole-body path), or packed in one
 * buffer that moves rather than being cloned string by string (table-scan.ts); `unpackRows` makes them strings.
 */
type Crossing = { digests: string[]; texts: string[]; packed?: undefined } | { digests: string[]; texts?: undefined; packed: PackedRows }

export type TableTaskResult =
  | ({ ok: true; route: 'create'; project: string; digest: string } & Crossing)
  | ({ ok: true; route: 'update'; project: string; base: string; updates: TableUpdateSpec[] | null } & Crossing)
  | { ok: true; route: 'digests'; project: string; digest: string; rowDigests: RowDigests }
  | { ok: false; status: number; message: string; details?: Detail[] }

/**
 * The texts of packed rows as strings, on the request thread: one decode of the buffer and a slice per row (V8
 * keeps a slice as a view of the decoded whole, so the rows' bytes are copied once).
 */
export function unpackRows(p: PackedRows): string[] {
  const all = Buffer.from(p.text.buffer, p.text.byteOffset, p.text.byteLength).toString(p.utf8 ? 'utf8' : 'latin1')
  return splitTexts(all, p.ends, 0, p.ends.length)
}

/**
 * A table's row digests as they cross back: ASCII digests back to back in one buffer that moves (digest i is
 * `text[ends[i - 1] ?? 0, ends[i])`), or strings when some digest is not [A-Za-z0-9] (it names no row; the
 * request thread answers it as it would any unknown digest).
 */
export type RowDigests = AsciiTexts | string[]

const validCreate = compileValidator(TableCreateReqSchema, 'body')
const validDigests = compileValidator(TableCreateFromDigestsReqSchema, 'body')
const validUpdate = compileValidator(TableUpdateReqSchema, 'body')

function validated<T>(value: unknown, check: (v: unknown) => Detail[] | null): T {
  const problems = check(value)
  if (problems) throw validationError(problems)
  return value as T
}

function checkProject(task: TableTask, project: string): void {
  const entity = project.slice(0, project.indexOf('/'))
  if (!canAccess(task, entity)) throw new DomainError(403, `This API key may not access entity ${JSON.stringify(entity)}`)
}

/** Checks in the order the request thread applies them to other routes: JSON, shape, schema, entity, bounds, rows. */
function parse<T>(task: TableTask, check: (v: unknown) => Detail[] | null): T {
  const body = parseJson(task.body)
  checkJsonShape(body, Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength).includes('\\u'))
  return validated<T>(body, check)
}

/**
 * The same checks on a scanned body's envelope (its rows, each a `0` there, were checked by the scan); null if it
 * does not parse, which a scanned body always does: the whole-body path then answers as it would have.
 */
function parseScanned<T>(scanned: Pick<ScannedBody, 'envelope'>, check: (v: unknown) => Detail[] | null): T | null {
  let body: unknown
  try {
    body = JSON.parse(scanned.envelope)
  } catch {
    return null
  }
  checkJsonShape(body, scanned.envelope.includes('\\u'))
  return validated<T>(body, check)
}

/** Create from a scanned body (table-scan.ts); null: the whole-body path. */
function createScanned(task: TableTask): TableTaskResult | null {
  const scanned = scanTableBody(task.body, 'create')
  const req = scanned && parseScanned<TableCreateReq>(scanned, validCreate)
  if (!scanned || !req) return null
  const { table } = req
  checkProject(task, table.project_id)
  checkCount(table.rows.length, MAX_REQUEST_ROWS, 'rows in one request')
  const { digests } = scanned.rows
  if (digests.length !== table.rows.length) return null
  const digest = createHash('sha256').update(digests.join('')).digest('hex')
  checkExpected(table.expected_digest, digest)
  return { ok: true, route: 'create', project: table.project_id, digest, digests, packed: scanned.rows }
}

/** Update from a scanned body; null: the whole-body path. */
function updateScanned(task: TableTask): TableTaskResult | null {
  const scanned = scanTableBody(task.body, 'update')
  const req = scanned && parseScanned<TableUpdateReq>(scanned, validUpdate)
  if (!scanned || !req) return null
  checkProject(task, req.project_id)
  checkCount(req.updates.length, MAX_REQUEST_ROWS, 'updates in one request')
  const { digests } = scanned.rows
  if (digests.length !== req.updates.length) return null
  const updates = req.updates.map((u, i): TableUpdateSpec | null => {
    if ('pop' in u) return digests[i] === '' ? u : null
    if (digests[i] === '') return null
    return 'append' in u ? { append: { row: null } } : { insert: { index: u.insert.index, row: null } }
  })
  if (updates.includes(null)) return null
  // Only appends (a dataset's chunks): no update objects cross back, row i is appended i-th.
  const appends = updates.every((u) => u !== null && 'append' in u)
  return {
    ok: true,
    route: 'update',
    project: req.project_id,
    base: req.base_digest,
    updates: appends ? null : (updates as TableUpdateSpec[]),
    digests,
    packed: scanned.rows,
  }
}

function create(task: TableTask): TableTaskResult {
  const scanned = createScanned(task)
  if (scanned) return scanned
  const { table } = parse<TableCreateReq>(task, validCreate)
  checkProject(task, table.project_id)
  checkCount(table.rows.length, MAX_REQUEST_ROWS, 'rows in one request')
  const out: PreparedRows = { digests: new Array(table.rows.length), texts: new Array(table.rows.length) }
  table.rows.forEach((r, i) => {
    const s = toStored(r, `rows[${i}]`)
    out.digests[i] = s.digest
    out.texts[i] = s.val_dump
  })
  const digest = createHash('sha256').update(out.digests.join('')).digest('hex')
  checkExpected(table.expected_digest, digest)
  return { ok: true, route: 'create', project: table.project_id, digest, ...out }
}

function update(task: TableTask): TableTaskResult {
  const scanned = updateScanned(task)
  if (scanned) return scanned
  const req = parse<TableUpdateReq>(task, validUpdate)
  checkProject(task, req.project_id)
  checkCount(req.updates.length, MAX_REQUEST_ROWS, 'updates in one request')
  const out: PreparedRows = { digests: new Array(req.updates.length).fill(''), texts: new Array(req.updates.length).fill('') }
  // The rows travel once, digested; the updates go back without them.
  const updates = req.updates.map((u, i): TableUpdateSpec => {
    if ('pop' in u) return u
    const s = toStored('append' in u ? u.append.row : u.insert.row, `updates[${i}].${'append' in u ? 'append' : 'insert'}.row`)
    out.digests[i] = s.digest
    out.texts[i] = s.val_dump
    return 'append' in u ? { append: { row: null } } : { insert: { index: u.insert.index, row: null } }
  })
  return { ok: true, route: 'update', project: req.project_id, base: req.base_digest, updates, ...out }
}

function fromDigests(task: TableTask): TableTaskResult {
  const scanned = scanDigestList(task.body)
  const req = scanned && parseScanned<TableCreateFromDigestsReq>(scanned, validDigests)
  if (!scanned || !req) return fromDigestsParsed(task, parse<TableCreateFromDigestsReq>(task, validDigests))
  checkProject(task, req.project_id)
  const { text, ends } = scanned.digests
  checkCount(ends.length, MAX_TABLE_ROWS, 'row digests')
  const digest = createHash('sha256').update(text).digest('hex')
  checkExpected(req.expected_digest, digest)
  return { ok: true, route: 'digests', project: req.project_id, digest, rowDigests: scanned.digests }
}

/** The same from a body parsed whole (escapes, odd digests, invalid JSON: the scan gave up). */
function fromDigestsParsed(task: TableTask, req: TableCreateFromDigestsReq): TableTaskResult {
  checkProject(task, req.project_id)
  const digests = req.row_digests
  checkCount(digests.length, MAX_TABLE_ROWS, 'row digests')
  const joined = digests.join('')
  const digest = createHash('sha256').update(joined).digest('hex')
  checkExpected(req.expected_digest, digest)
  if (!digests.every((d) => DIGEST.test(d))) return { ok: true, route: 'digests', project: req.project_id, digest, rowDigests: digests }
  const ends = new Int32Array(digests.length)
  let end = 0
  digests.forEach((d, i) => (ends[i] = end += d.length))
  // A buffer of its own (Buffer.from may hand out a slice of Node's shared pool), so that it can move.
  const text = new Uint8Array(joined.length)
  Buffer.from(text.buffer).write(joined, 'latin1')
  return { ok: true, route: 'digests', project: req.project_id, digest, rowDigests: { text, ends } }
}

export function prepareTableTask(task: TableTask): TableTaskResult {
  try {
    if (task.route === 'digests') return fromDigests(task)
    return task.route === 'create' ? create(task) : update(task)
  } catch (e) {
    if (e instanceof DomainError) return { ok: false, status: e.status, message: e.message, ...(e.details ? { details: e.details } : {}) }
    return { ok: false, status: 400, message: `Malformed request: ${(e as Error).message}` }
  }
}

/** The DomainError a failed result stands for, on the request thread. */
export function tableTaskError(r: Extract<TableTaskResult, { ok: false }>): DomainError {
  return r.details ? validationError(r.details) : new DomainError(r.status, r.message)
}
