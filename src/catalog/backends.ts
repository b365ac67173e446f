import type { FeedbackCreateReq, FeedbackCreateRes, FeedbackQueryReq } from '../schemas/feedback.js'
import type { ObjectVersion, ObjQueryReq } from '../schemas/objects.js'
import type { FeedbackField, FeedbackValues } from '../query/feedback-fields.js'
import type { TableQueryReq, TableRow, TableStatsRow, TableUpdateSpec } from '../schemas/tables.js'

/**
 * What the object-side routes need of a store, whichever holds the data: the DuckDB catalog (objects.ts,
 * tables.ts) or ClickHouse (clickhouse/objects.ts, clickhouse/tables.ts). The rules both follow (digests,
 * aliases, delete checks, table updates) live in the *-rules.ts files, so the two cannot drift apart.
 */
export interface ObjectsBackend {
  /** Same content, same digest; re-creating a deleted version brings it back as latest. */
  create(projectId: string, objectId: string, val: unknown, userId: string): Promise<{ digest: string; object_id: string }>
  /** `digest` may be a content digest, `latest`, or `v<N>`; a deleted version is returned with its `deleted_at`. */
  read(projectId: string, objectId: string, digest: string, metadataOnly?: boolean): Promise<ObjectVersion | null>
  /** Live versions only; `latest` is computed over the whole object before the filters apply. */
  query(req: ObjQueryReq): Promise<ObjectVersion[]>
  /** Soft delete (no digests: every live version); answers how many versions were deleted. */
  delete(projectId: string, objectId: string, digests?: string[] | null): Promise<number>
  /** Op code and other bytes objects point at, content-addressed by Weave's file digest. */
  createFile(projectId: string, content: Buffer): Promise<string>
  readFile(projectId: string, digest: string): Promise<Buffer | null>
}

export interface TablesBackend {
  create(project: string, rows: unknown[], expected?: string | null): Promise<{ digest: string; row_digests: string[] }>
  update(project: string, base: string, updates: TableUpdateSpec[]): Promise<{ digest: string; updated_row_digests: string[] }>
  createFromDigests(project: string, digests: string[], expected?: string | null): Promise<{ digest: string }>
  /** The table's rows, filtered, sorted and paged; an unknown table has none. */
  query(project: string, q: Omit<TableQueryReq, 'project_id'>): Promise<TableRow[]>
  /** Rows at the given positions (missing positions left out); null if there is no such table. */
  rowsAt(project: string, digest: string, positions: number[]): Promise<Map<number, unknown> | null>
  /** Rows by row digest (digests the table does not list left out); null if there is no such table. */
  rowsById(project: string, digest: string, ids: string[]): Promise<Map<string, unknown> | null>
  /** Row counts (and bytes of the distinct rows listed) of the named tables that exist. */
  stats(project: string, digests: string[], withSize: boolean): Promise<TableStatsRow[]>
}

/** Bytes written to a temporary file and fsynced, not yet visible under their digest. */
export interface Staged {
  tmp: string
  digest: string
  size: number
}

export interface StoredFile {
  size: number
  /** Read from disk as the consumer pulls; the file is closed when iteration ends or is abandoned. */
  chunks: AsyncIterable<Buffer>
}

/** File bytes, content-addressed per project: staged (hashed, fsynced) first, made visible by commit. */
export interface FilesBackend {
  stage(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Staged>
  /** Makes staged bytes the project's file of their digest; a reader sees the whole file or none. */
  commit(projectId: string, staged: Staged): Promise<void>
  /** Removes staged bytes that will not be committed (no-op once committed). */
  discard(staged: Staged): Promise<void>
  /** The file, ready to stream, or null if unknown to the project. */
  open(projectId: string, digest: string): Promise<StoredFile | null>
  /** Bytes of every file in the project (each digest once). */
  totalSize(projectId: string): Promise<number>
}

/** Feedback rows about calls and objects (docs/feedback.md), checked by the rules in feedback-rules.ts. */
export interface FeedbackBackend {
  /** Every row is checked before any is stored; one bad row stores none. */
  create(reqs: FeedbackCreateReq[], userId: string): Promise<FeedbackCreateRes[]>
  /** The rows the query matches (sorted, paged, with the fields asked for) and how many match in all. */
  query(q: FeedbackQueryReq): Promise<{ result: Record<string, unknown>[]; total_count: number }>
  /** Deletes the rows a purge query names by id. */
  purge(project: string, query: unknown): Promise<void>
  /** Deletes a row and creates its replacement (a new id), both or neither. */
  replace(project: string, feedbackId: string, req: FeedbackCreateReq, userId: string): Promise<FeedbackCreateRes>
  /**
   * Each call's value of each feedback field (query/feedback-fields.ts), for call queries that filter or
   * sort on them. Several rows of a type about one call: the earliest created decides; for `[*]`, the
   * earliest whose value is not empty (catalog/feedback.ts `pick`, which both stores use).
   */
  callValues(project: string, fields: FeedbackField[]): Promise<Map<string, FeedbackValues>>
}
