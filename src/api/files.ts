import { once } from 'node:events'
import type { Readable } from 'node:stream'
import busboy from 'busboy'
import { canAccess } from '../core/principal.js'
import { DomainError } from '../core/errors.js'
import { bodyProject, route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { FilesBackend } from '../catalog/backends.js'
import type { Staged } from '../catalog/files.js'
import { PROJECT_PART_PATTERN } from '../schemas/common.js'
import { FileContentReqSchema, FileCreateResSchema, type FileContentReq } from '../schemas/objects.js'
import { FilesStatsReqSchema, FilesStatsResSchema, type FilesStatsReq } from '../schemas/files.js'

/** Room for the multipart framing and the form fields around the file, on top of the file-size limit. */
const FORM_OVERHEAD = 64 * 1024
const PROJECT = new RegExp(`^${PROJECT_PART_PATTERN}/${PROJECT_PART_PATTERN}$`)

/** The project is a form field, so the entity check happens here rather than in the route's `project`. */
function checkProject(ctx: Ctx, project: string | undefined): string {
  if (!project || project.length > 256 || !PROJECT.test(project))
    throw new DomainError(400, 'Form field project_id must be "entity/project"')
  if (ctx.principal && !canAccess(ctx.principal, project.slice(0, project.indexOf('/'))))
    throw new DomainError(403, `This API key may not access ${project}`)
  return project
}

interface Upload {
  fields: Record<string, string>
  staged?: Staged
  /** busboy stopped writing the file at the limit: what was staged is cut short. */
  truncated: boolean
}

function multipart(ctx: Ctx, maxFileBytes: number): busboy.Busboy {
  try {
    return busboy({
      headers: { 'content-type': ctx.headers['content-type'] },
      // busboy reports 'limit' on reaching fileSize, not on passing it: one byte more lets a file of exactly the
      // limit through.
      limits: { files: 1, fields: 8, fieldSize: 4096, parts: 16, fileSize: maxFileBytes + 1 },
    })
  } catch (e) {
    throw new DomainError(400, `Expected a multipart/form-data body: ${(e as Error).message}`)
  }
}

/**
 * Parses the multipart body as it streams in: the form fields kept, the `file` part written to a staged file as
 * it arrives, each layer waiting on the next (disk ← busboy ← socket), so the body is never held whole. A
 * project the key may not use stops the upload as soon as its field is read. On any failure nothing is left.
 */
async function receive(ctx: Ctx, files: FilesBackend, maxFileBytes: number): Promise<Upload> {
  const bb = multipart(ctx, maxFileBytes)
  const up: Upload = { fields: {}, truncated: false }
  let staging: Promise<Staged> | undefined
  let part: Readable | undefined
  bb.on('field', (name, value) => {
    up.fields[name] = value
    if (name === 'project_id') {
      try {
        checkProject(ctx, value)
      } catch (e) {
        bb.destroy(e as Error)
      }
    }
  })
  bb.on('file', (name, stream) => {
    // A form cut short errors the part's stream, maybe before stage() starts reading it; the reader (and `parsed`)
    // see the error, and an 'error' with no listener would take the process down.
    stream.on('error', () => {})
    // busboy goes on parsing the chunk it was given after a handler destroyed it: a part starting there is dropped.
    if (name !== 'file' || staging || bb.destroyed) return void stream.resume()
    part = stream
    stream.on('limit', () => (up.truncated = true))
    staging = files.stage(stream)
    // A failed write stops the parse rather than leaving it waiting on a reader that is gone.
    staging.catch((e: Error) => bb.destroy(e))
  })
  const parsed = new Promise<void>((resolve, reject) => bb.on('close', resolve).on('error', reject))
  parsed.catch(() => {})
  try {
    for await (const chunk of ctx.bodyStream ?? []) {
      // Destroyed (a refused project, a failed write): `parsed` has the reason. The rest of the body (within the
      // limit) is read and dropped, so the client, still sending, gets to read the answer.
      if (bb.destroyed) continue
      // A failure while waiting destroys bb: the next chunk sees it.
      if (!bb.write(chunk) && !bb.destroyed) await Promise.race([once(bb, 'drain'), parsed]).catch(() => {})
    }
    if (!bb.destroyed) bb.end()
    await parsed
    up.staged = await staging
    return up
  } catch (e) {
    bb.destroy()
    // Ends stage()'s read of the part (a no-op if it finished), so it removes its temporary file and settles.
    part?.destroy(new Error('upload abandoned'))
    const staged = await staging?.catch(() => undefined)
    if (staged) await files.discard(staged)
    throw uploadError(e)
  }
}

/** Our own errors and system errors (a failed write: 500) pass; the rest are busboy's complaints about the body. */
function uploadError(e: unknown): unknown {
  if (e instanceof DomainError) return e
  const code = (e as NodeJS.ErrnoException).code
  if (typeof code === 'string' && !code.startsWith('ERR_')) return e
  return new DomainError(400, `Malformed multipart body: ${(e as Error).message}`)
}

function createFile(files: FilesBackend, maxFileBytes: number) {
  return async (ctx: Ctx): Promise<Reply> => {
    const { fields, staged, truncated } = await receive(ctx, files, maxFileBytes)
    try {
      const project = checkProject(ctx, fields.project_id)
      if (truncated) throw new DomainError(413, `File is larger than the limit of ${maxFileBytes} bytes`)
      if (!staged) throw new DomainError(400, 'Form field file is missing')
      const expected = fields.expected_digest
      if (expected && expected !== staged.digest)
        throw new DomainError(409, `Digest mismatch: expected ${expected}, computed ${staged.digest}`)
      await files.commit(project, staged)
      return { body: { digest: staged.digest } }
    } finally {
      if (staged) await files.discard(staged)
    }
  }
}

function readFile(files: FilesBackend) {
  return async (ctx: Ctx<FileContentReq>): Promise<Reply> => {
    const file = await files.open(ctx.body.project_id, ctx.body.digest)
    if (!file) throw new DomainError(404, `File with digest ${ctx.body.digest} not found`)
    return { stream: file.chunks, contentType: 'application/octet-stream' }
  }
}

function fileStats(files: FilesBackend) {
  return async (ctx: Ctx<FilesStatsReq>): Promise<Reply> => ({
    body: { total_size_bytes: await files.totalSize(ctx.body.project_id) },
  })
}

const common = { family: 'trace' as const, auth: 'key' as const, tags: ['Files'] }

/** Weave's file endpoints (docs/objects.md#files). */
export function fileRoutes(files: FilesBackend, maxFileBytes: number): RouteDef[] {
  return [
    route({
      ...common,
      method: 'POST',
      path: '/file/create',
      summary: 'Store a file (multipart: project_id, file, expected_digest?); content-addressed',
      description: `Streamed to disk as it arrives; files over the server's file-size limit are refused with 413.`,
      streamBody: { maxBytes: maxFileBytes + FORM_OVERHEAD },
      response: { description: 'The file digest', schema: FileCreateResSchema },
      handler: createFile(files, maxFileBytes),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/file/content',
      summary: 'Read a stored file (streamed)',
      body: FileContentReqSchema,
      response: { description: 'The bytes', contentType: 'application/octet-stream' },
      project: bodyProject,
      handler: readFile(files),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/files/query_stats',
      summary: "Total size of a project's files",
      body: FilesStatsReqSchema,
      response: { description: 'Total bytes', schema: FilesStatsResSchema },
      project: bodyProject,
      handler: fileStats(files),
    }),
  ]
}
