import busboy from 'busboy'
import { Type } from '@sinclair/typebox'
import { canAccess } from '../catalog/keys.js'
import { DomainError } from '../core/errors.js'
import { bodyProject, route, type Ctx, type RouteDef } from './route.js'
import type { ObjectStore } from '../catalog/objects.js'
import { Nullable, ProjectIdSchema } from '../schemas/common.js'

const OBJECT_ID = /^[\w.-]{1,128}$/

const ObjCreateReqSchema = Type.Object(
  {
    obj: Type.Object({
      project_id: ProjectIdSchema,
      object_id: Type.String({ minLength: 1, maxLength: 1024 }),
      val: Type.Unknown(),
      builtin_object_class: Type.Optional(Nullable(Type.String())),
      set_base_object_class: Type.Optional(Nullable(Type.String())),
      expected_digest: Type.Optional(Nullable(Type.String())),
      svc_user_id: Type.Optional(Nullable(Type.String())),
      wb_user_id: Type.Optional(Nullable(Type.String())),
    }),
  },
  { additionalProperties: false },
)

const ObjReadReqSchema = Type.Object(
  {
    project_id: ProjectIdSchema,
    object_id: Type.String({ minLength: 1, maxLength: 1024 }),
    digest: Type.String({ minLength: 1, maxLength: 128, description: 'A content digest, "latest" or "v<N>"' }),
    metadata_only: Type.Optional(Nullable(Type.Boolean())),
    include_tags_and_aliases: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: false },
)

const FileContentReqSchema = Type.Object(
  { project_id: ProjectIdSchema, digest: Type.String({ minLength: 1, maxLength: 128 }) },
  { additionalProperties: false },
)

function checkObjectId(id: string): void {
  // Weave answers InvalidFieldError (403) here, not a validation error.
  if (!OBJECT_ID.test(id))
    throw new DomainError(
      403,
      `Invalid object_id ${JSON.stringify(id.slice(0, 200))}: only letters, digits, '_', '.' and '-', at most 128 characters`,
    )
}

/** The fields and the one file of a multipart/form-data body. */
function parseMultipart(ctx: Ctx, maxBytes: number): Promise<{ fields: Record<string, string>; file?: Buffer }> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy
    try {
      bb = busboy({ headers: { 'content-type': ctx.headers['content-type'] }, limits: { files: 1, fields: 16, fileSize: maxBytes } })
    } catch (e) {
      reject(new DomainError(400, `Expected a multipart/form-data body: ${(e as Error).message}`))
      return
    }
    const fields: Record<string, string> = {}
    let file: Buffer | undefined
    bb.on('field', (name, value) => (fields[name] = value))
    bb.on('file', (_name, stream) => {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => (file = Buffer.concat(chunks)))
    })
    bb.on('error', (e) => reject(new DomainError(400, `Malformed multipart body: ${(e as Error).message}`)))
    bb.on('close', () => resolve({ fields, file }))
    bb.end(ctx.rawBody ?? Buffer.alloc(0))
  })
}

/** The object endpoints the Weave SDKs need to save ops and objects (reference §3.11, §3.14). */
export function objectRoutes(objects: ObjectStore, maxBodyBytes: number): RouteDef[] {
  const tags = ['Objects']
  return [
    route({
      method: 'POST',
      path: '/obj/create',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Create an object version (same content, same digest)',
      body: ObjCreateReqSchema,
      response: { description: 'The digest', schema: Type.Object({ digest: Type.String(), object_id: Type.String() }) },
      project: (ctx) => ctx.body.obj.project_id,
      handler: async (ctx) => {
        const o = ctx.body.obj
        checkObjectId(o.object_id)
        const created = await objects.create(o.project_id, o.object_id, o.val, ctx.principal?.userId ?? 'anonymous')
        if (o.expected_digest && o.expected_digest !== created.digest) {
          throw new DomainError(409, `Digest mismatch: expected ${o.expected_digest}, computed ${created.digest}`)
        }
        return { body: created }
      },
    }),
    route({
      method: 'POST',
      path: '/obj/read',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Read one object version',
      body: ObjReadReqSchema,
      project: bodyProject,
      handler: async (ctx) => {
        const b = ctx.body
        const obj = await objects.read(b.project_id, b.object_id, b.digest, b.metadata_only === true)
        if (!obj) throw new DomainError(404, `Obj ${b.object_id}:${b.digest} not found`)
        if (obj.deleted_at)
          throw new DomainError(404, `${b.object_id}:v${obj.version_index} was deleted at ${obj.deleted_at}`, {
            extra: { deleted_at: obj.deleted_at },
          })
        return { body: { obj } }
      },
    }),
    route({
      method: 'POST',
      path: '/file/create',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Store a file (multipart: project_id, file); content-addressed',
      rawBody: true,
      response: { description: 'The file digest', schema: Type.Object({ digest: Type.String() }) },
      handler: async (ctx) => {
        const { fields, file } = await parseMultipart(ctx, maxBodyBytes)
        const project = fields.project_id
        if (!project || !/^[^/\s]+\/[^/\s]+$/.test(project) || project.length > 256)
          throw new DomainError(400, 'Form field project_id must be "entity/project"')
        if (ctx.principal && !canAccess(ctx.principal, project.slice(0, project.indexOf('/'))))
          throw new DomainError(403, `This API key may not access ${project}`)
        if (!file) throw new DomainError(400, 'Form field file is missing')
        const digest = await objects.createFile(project, file)
        if (fields.expected_digest && fields.expected_digest !== digest)
          throw new DomainError(409, `Digest mismatch: expected ${fields.expected_digest}, computed ${digest}`)
        return { body: { digest } }
      },
    }),
    route({
      method: 'POST',
      path: '/file/content',
      family: 'trace',
      auth: 'key',
      tags,
      summary: 'Read a stored file',
      body: FileContentReqSchema,
      project: bodyProject,
      handler: async (ctx) => {
        const content = await objects.readFile(ctx.body.project_id, ctx.body.digest)
        if (!content) throw new DomainError(404, `File ${ctx.body.digest} not found`)
        return { raw: content, contentType: 'application/octet-stream' }
      },
    }),
  ]
}
