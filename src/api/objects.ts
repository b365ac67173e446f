import { DomainError } from '../core/errors.js'
import type { ObjectsBackend } from '../catalog/backends.js'
import { NumDeletedSchema } from '../schemas/common.js'
import { bodyProject, route, type Ctx, type Reply, type RouteDef } from './route.js'
import { valueDigest } from '../catalog/digest.js'
import {
  ObjCreateReqSchema,
  ObjCreateResSchema,
  ObjReadReqSchema,
  ObjQueryReqSchema,
  ObjQueryResSchema,
  ObjDeleteReqSchema,
  MAX_DELETE_DIGESTS,
  type ObjQueryReq,
  type ObjDeleteReq,
  type ObjCreateReq,
  type ObjReadReq,
} from '../schemas/objects.js'

const OBJECT_ID = /^[\w.-]{1,128}$/

function checkObjectId(id: string): void {
  // Weave answers InvalidFieldError (403) here, not a validation error.
  if (!OBJECT_ID.test(id))
    throw new DomainError(
      403,
      `Invalid object_id ${JSON.stringify(id.slice(0, 200))}: only letters, digits, '_', '.' and '-', at most 128 characters`,
    )
}

function createObject(objects: ObjectsBackend) {
  return async (ctx: Ctx<ObjCreateReq>): Promise<Reply> => {
    const o = ctx.body.obj
    checkObjectId(o.object_id)
    // Checked before storing: a refused create must leave nothing behind.
    const digest = valueDigest(o.val)
    if (o.expected_digest && o.expected_digest !== digest) {
      throw new DomainError(409, `Digest mismatch: expected ${o.expected_digest}, computed ${digest}`)
    }
    return { body: await objects.create(o.project_id, o.object_id, o.val, ctx.principal?.userId ?? 'anonymous') }
  }
}

function readObject(objects: ObjectsBackend) {
  return async (ctx: Ctx<ObjReadReq>): Promise<Reply> => {
    const b = ctx.body
    const obj = await objects.read(b.project_id, b.object_id, b.digest, b.metadata_only === true)
    if (!obj) throw new DomainError(404, `Obj ${b.object_id}:${b.digest} not found`)
    if (obj.deleted_at)
      throw new DomainError(404, `${b.object_id}:v${obj.version_index} was deleted at ${obj.deleted_at}`, {
        extra: { deleted_at: obj.deleted_at },
      })
    return { body: { obj } }
  }
}

function queryObjects(objects: ObjectsBackend) {
  return async (ctx: Ctx<ObjQueryReq>): Promise<Reply> => ({ body: { objs: await objects.query(ctx.body) } })
}

function deleteObject(objects: ObjectsBackend) {
  return async (ctx: Ctx<ObjDeleteReq>): Promise<Reply> => {
    const b = ctx.body
    if (b.digests && b.digests.length > MAX_DELETE_DIGESTS)
      throw new DomainError(
        400,
        `Object delete request contains ${b.digests.length} objects. Please delete ${MAX_DELETE_DIGESTS} or fewer objects at a time.`,
      )
    return { body: { num_deleted: await objects.delete(b.project_id, b.object_id, b.digests) } }
  }
}

const common = { family: 'trace' as const, auth: 'key' as const, tags: ['Objects'] }

/** The object endpoints the Weave SDKs need to save ops and objects (docs/objects.md); files are in files.ts. */
export function objectRoutes(objects: ObjectsBackend): RouteDef[] {
  return versionRoutes(objects)
}

function versionRoutes(objects: ObjectsBackend): RouteDef[] {
  return [
    route({
      ...common,
      method: 'POST',
      path: '/obj/create',
      summary: 'Create an object version (same content, same digest)',
      body: ObjCreateReqSchema,
      response: { description: 'The digest', schema: ObjCreateResSchema },
      project: (ctx) => ctx.body.obj.project_id,
      handler: createObject(objects),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/obj/read',
      summary: 'Read one object version',
      body: ObjReadReqSchema,
      project: bodyProject,
      handler: readObject(objects),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/objs/query',
      summary: 'Query object versions',
      body: ObjQueryReqSchema,
      response: { description: 'Object versions', schema: ObjQueryResSchema },
      project: bodyProject,
      handler: queryObjects(objects),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/obj/delete',
      summary: 'Soft-delete versions of an object (no digests: all of them)',
      body: ObjDeleteReqSchema,
      response: { description: 'How many versions were deleted', schema: NumDeletedSchema },
      project: bodyProject,
      handler: deleteObject(objects),
    }),
  ]
}
